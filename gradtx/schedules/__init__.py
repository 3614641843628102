r"""TF1's learning-rate schedules (`tf.compat.v1.train.*_decay`) as pure functions of the step count.

Each factory takes TF's arguments in TF's order, less `global_step`, and returns
`schedule(count)`: a scalar float32 array, for `count` a Python int or an int32 array
(traced under `jit` without retracing). An optimizer calls it with `count = t-1` inside
step t, which is TF's `global_step` before its increment.

The arithmetic is TF's, op for op, in float32 (the step cast first, `floor` for
`staircase`, `minimum` to clamp), so eager values equal TensorFlow's bit for bit. Under
`jit`, optimization barriers keep XLA from rewriting `x / 41.0` as `x * (1/41.0)`
(`floor(41 / 41)` would be 0, `(1 - 13/13) ** 2.5` NaN); what remains is XLA fusing
`a * b + c` into one FMA on CPU: an ulp or two.

Beside them, optax's composite schedules with optax's numbers: `join_schedules`,
`piecewise_interpolate`, `warmup_cosine_decay`, `warmup_exponential_decay`, the one-cycle
schedules and `sgdr` (and `exponential_decay`'s `transition_begin` / `end_value`); and the
warmup-stable-decay schedule (`warmup_stable_decay_schedule`, pytorch-optimizer's `get_wsd_schedule`).
"""

from gradtx.schedules._cosine import (
    cosine_decay,
    cosine_decay_restarts,
    linear_cosine_decay,
    noisy_linear_cosine_decay,
)
from gradtx.schedules._decay import (
    exponential_decay,
    inverse_time_decay,
    natural_exp_decay,
    piecewise_constant,
    polynomial_decay,
)
from gradtx.schedules._join import join_schedules, piecewise_interpolate
from gradtx.schedules._optax_style import (
    cosine_onecycle,
    linear_onecycle,
    sgdr,
    warmup_cosine_decay,
    warmup_exponential_decay,
)
from gradtx.schedules._sign import cosine_sign_decay, linear_sign_decay, restart_sign_decay
from gradtx.schedules._warmup import linear_warmup
from gradtx.schedules._wsd import warmup_stable_decay_schedule

__all__ = [
    "cosine_decay",
    "cosine_decay_restarts",
    "cosine_onecycle",
    "cosine_sign_decay",
    "exponential_decay",
    "inverse_time_decay",
    "join_schedules",
    "linear_cosine_decay",
    "linear_onecycle",
    "linear_sign_decay",
    "linear_warmup",
    "natural_exp_decay",
    "noisy_linear_cosine_decay",
    "piecewise_constant",
    "piecewise_interpolate",
    "polynomial_decay",
    "restart_sign_decay",
    "sgdr",
    "warmup_cosine_decay",
    "warmup_exponential_decay",
    "warmup_stable_decay_schedule",
]
