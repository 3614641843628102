"""optax's `optax.schedules` under its names: `gradtx.optax_compat.schedules.linear_schedule`, ...

The same functions are at `gradtx.optax_compat`'s top level, as optax has them at its own
(`StatefulSchedule` and `Schedule` only here, as in optax).
"""

from __future__ import annotations

from gradtx._core.protocol import Schedule
from gradtx.optax_compat._inject import (
    InjectHyperparamsState,
    InjectStatefulHyperparamsState,
    StatefulSchedule,
    WrappedSchedule,
    inject_hyperparams,
    inject_stateful_hyperparams,
)
from gradtx.optax_compat._schedules import (
    constant_schedule,
    cosine_decay_schedule,
    exponential_decay,
    join_schedules,
    linear_schedule,
    piecewise_constant_schedule,
    piecewise_interpolate_schedule,
    polynomial_schedule,
)
from gradtx.optax_compat._schedules_composite import (
    cosine_onecycle_schedule,
    linear_onecycle_schedule,
    sgdr_schedule,
    warmup_constant_schedule,
    warmup_cosine_decay_schedule,
    warmup_exponential_decay_schedule,
)

__all__ = [
    "InjectHyperparamsState",
    "InjectStatefulHyperparamsState",
    "Schedule",
    "StatefulSchedule",
    "WrappedSchedule",
    "constant_schedule",
    "cosine_decay_schedule",
    "cosine_onecycle_schedule",
    "exponential_decay",
    "inject_hyperparams",
    "inject_stateful_hyperparams",
    "join_schedules",
    "linear_onecycle_schedule",
    "linear_schedule",
    "piecewise_constant_schedule",
    "piecewise_interpolate_schedule",
    "polynomial_schedule",
    "sgdr_schedule",
    "warmup_constant_schedule",
    "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
]
