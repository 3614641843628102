"""The table, `optax.contrib`'s schedule-free learning: `schedule_free` in optax's `ScheduleFreeState`, its
evaluation params, and the SGD and AdamW optax builds on it.

As `_table.py`: each name is a gradtx factory in optax's signature and state classes, or the recipe
optax writes of them; `gradtx.optax_compat.contrib` gathers them under optax's address.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gradtx
from gradtx._core import protocol as _protocol
from gradtx.optax_compat._mirror import recipe, relaid
from gradtx.optax_compat._table import add_decayed_weights, scale_by_learning_rate, scale_by_rms, sgd
from gradtx.optax_compat._table_schedules import warmup_constant_schedule


# --------------------------------------------------------------------------- optax's state class
class ScheduleFreeState(NamedTuple):
    """optax's `ScheduleFreeState`, field for field."""

    b1: Any  # the interpolation between z and its average x, in the params' dtype
    weight_sum: Any  # the sum of the averaging weights so far
    step_count: Any  # int32: this step, 1-based (gradtx's count + 1)
    max_lr: Any  # the largest learning rate so far
    base_optimizer_state: Any  # the base optimizer's state
    z: _protocol.Updates  # the base sequence z_t (starts at the initial params)


# --------------------------------------------------------------------------- schedule-free
def _to_optax(state: Any) -> ScheduleFreeState:
    base, sf = state
    return ScheduleFreeState(sf.b1, sf.weight_sum, sf.count + 1, sf.max_lr, base, sf.z)


def _from_optax(state: ScheduleFreeState) -> tuple[Any, Any]:
    sf = gradtx.ScaleByScheduleFreeState(
        state.step_count - 1, state.z, state.b1, state.weight_sum, state.max_lr
    )
    return state.base_optimizer_state, sf


@recipe("contrib.schedule_free", gradtx.schedule_free, example="schedule_free(optax.sgd(1.0), 1.0)")
def schedule_free(a):
    """`gradtx.schedule_free` in optax's `ScheduleFreeState` (its count is optax's `step_count - 1`; a rate
    schedule is called with `step_count`, as optax calls it)."""
    lr = a.learning_rate
    rate = (lambda count: lr(count + 1)) if callable(lr) else lr
    tx = gradtx.schedule_free(a.base_optimizer, rate, a.b1, a.weight_lr_power, state_dtype=a.state_dtype)
    return relaid(tx, _to_optax, _from_optax)


@recipe(
    "contrib.schedule_free_eval_params",
    gradtx.schedule_free_eval_params,
    kind="function",
    returns="The params to evaluate at, `x = (y - (1 - b1) z) / b1`.",
    example="schedule_free_eval_params(contrib.schedule_free_sgd(1.0).init(jnp.ones(1)), jnp.ones(1))",
    api=False,
)
def schedule_free_eval_params(a):
    """`gradtx.schedule_free_eval_params` of a `schedule_free` state (optax's `ScheduleFreeState`, or
    gradtx's)."""
    sf = _from_optax(a.state) if isinstance(a.state, ScheduleFreeState) else a.state
    return gradtx.schedule_free_eval_params(sf, a.params)


def _warmed_up(learning_rate: Any, warmup_steps: int | None) -> Any:
    if warmup_steps is None:
        return learning_rate
    return warmup_constant_schedule(init_value=0, peak_value=learning_rate, warmup_steps=warmup_steps)


@recipe("contrib.schedule_free_sgd", schedule_free, sgd)
def schedule_free_sgd(a):
    """`schedule_free(sgd(lr), lr, ...)` (after `add_decayed_weights` with a decay), `lr` warmed up by
    `warmup_constant_schedule(0, learning_rate, warmup_steps)` when given."""
    lr = _warmed_up(a.learning_rate, a.warmup_steps)
    optimizer = sgd(lr)
    if a.weight_decay is not None:
        optimizer = gradtx.chain(add_decayed_weights(a.weight_decay), optimizer)
    return schedule_free(optimizer, lr, a.b1, a.weight_lr_power, a.state_dtype)


@recipe("contrib.schedule_free_adamw", schedule_free, scale_by_rms)
def schedule_free_adamw(a):
    """`schedule_free(chain(scale_by_rms(b2, eps, eps_in_sqrt=False, bias_correction=True),
    add_decayed_weights(weight_decay), scale_by_learning_rate(lr)), lr, ...)`."""
    lr = _warmed_up(a.learning_rate, a.warmup_steps)
    rms = scale_by_rms(decay=a.b2, eps=a.eps, eps_in_sqrt=False, bias_correction=True)
    optimizer = gradtx.chain(rms, add_decayed_weights(a.weight_decay), scale_by_learning_rate(lr))
    return schedule_free(optimizer, lr, a.b1, a.weight_lr_power, a.state_dtype)
