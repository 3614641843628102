"""optax.contrib's schedule-free learning under optax's names, signatures, defaults and state class:
`schedule_free` (around any optimizer), `schedule_free_sgd`, `schedule_free_adamw`, the eval params.

Each is `gradtx.schedule_free` (the chain optax builds around it from optax_compat's pieces), its state in
optax's `ScheduleFreeState` layout. No math here; re-exported by `_contrib_more`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gradtx
import gradtx.optax_compat as _optax
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.transforms import ScaleByScheduleFreeState

__all__ = [
    "ScheduleFreeState",
    "schedule_free",
    "schedule_free_adamw",
    "schedule_free_eval_params",
    "schedule_free_sgd",
]


class ScheduleFreeState(NamedTuple):
    """State of optax.contrib's `schedule_free` (optax's, field for field)."""

    b1: Any  # the interpolation between z and its average x, in the params' dtype
    weight_sum: Any  # the sum of the averaging weights so far
    step_count: Any  # int32: this step, 1-based (gradtx's count + 1)
    max_lr: Any  # the largest learning rate so far
    base_optimizer_state: Any  # the base optimizer's state
    z: _protocol.Updates  # the base sequence z_t (starts at the initial params)


def _to_optax(state: Any) -> ScheduleFreeState:
    """`gradtx.schedule_free`'s `(base state, ScaleByScheduleFreeState)` in optax's layout."""
    base, sf = state
    return ScheduleFreeState(sf.b1, sf.weight_sum, sf.count + 1, sf.max_lr, base, sf.z)


def _from_optax(state: ScheduleFreeState) -> tuple[Any, ScaleByScheduleFreeState]:
    """optax's layout back in `gradtx.schedule_free`'s."""
    sf = ScaleByScheduleFreeState(state.step_count - 1, state.z, state.b1, state.weight_sum, state.max_lr)
    return state.base_optimizer_state, sf


@_factory.api
def schedule_free(
    base_optimizer: Any,
    learning_rate: Any,
    b1: Any = 0.9,
    weight_lr_power: Any = 2.0,
    state_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `schedule_free`: `gradtx.schedule_free` in optax's `ScheduleFreeState` (its count is
    optax's `step_count - 1`; a rate schedule is called with `step_count`, as optax calls it).

    Args:
      base_optimizer: the optimizer whose updates step `z` (its momentum switched off).
      learning_rate: the rate that weighs the average (number, scalar array or schedule).
      b1: the interpolation between `z` and its average `x`, in (0, 1].
      weight_lr_power: the power of the rate in the averaging weights, >= 0.
      state_dtype: the dtype of `z` (None: each parameter's).

    Returns:
      A `GradientTransformation` with state `ScheduleFreeState(b1, weight_sum, step_count, max_lr,
      base_optimizer_state, z)`.

    Raises:
      TypeError: for a non-transform `base_optimizer` or a non-float `state_dtype`.
      ValueError: for a bad rate, `b1` or power.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> from gradtx.optax_compat import _contrib_schedule_free as contrib
        >>> tx = contrib.schedule_free(optax.sgd(0.5), learning_rate=0.5, b1=0.5)
        >>> params = jnp.array([2.0])
        >>> u, state = tx.update(params, tx.init(params), params)
        >>> u, int(state.step_count), contrib.schedule_free_eval_params(state, params + u)
        (Array([-1.], dtype=float32), 2, Array([1.], dtype=float32))
    """
    rate = (lambda count: learning_rate(count + 1)) if callable(learning_rate) else learning_rate
    tx = gradtx.schedule_free(base_optimizer, rate, b1, weight_lr_power, state_dtype=state_dtype)

    def init_fn(params):
        return _to_optax(tx.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        updates, new_state = tx.update(updates, _from_optax(state), params, **extra_args)
        return updates, _to_optax(new_state)

    return _factory.composite(init_fn, update_fn, tx)


def schedule_free_eval_params(state: Any, params: Any) -> Any:
    """optax.contrib's `schedule_free_eval_params`: `gradtx.schedule_free_eval_params` of its state.

    Args:
      state: a `ScheduleFreeState` (or any state `gradtx.schedule_free_eval_params` reads).
      params: the current params `y`.

    Returns:
      The params to evaluate at, `x = (y - (1 - b1) z) / b1`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _contrib_schedule_free as contrib
        >>> params = jnp.array([1.0])
        >>> contrib.schedule_free_eval_params(contrib.schedule_free_sgd().init(params), params)
        Array([1.], dtype=float32)
    """
    return gradtx.schedule_free_eval_params(
        _from_optax(state) if isinstance(state, ScheduleFreeState) else state, params
    )


def _warmed_up(learning_rate: Any, warmup_steps: int | None) -> Any:
    if warmup_steps is None:
        return learning_rate
    return _optax.warmup_constant_schedule(init_value=0, peak_value=learning_rate, warmup_steps=warmup_steps)


def schedule_free_sgd(
    learning_rate: Any = 1.0,
    warmup_steps: int | None = None,
    b1: Any = 0.9,
    weight_decay: Any = None,
    weight_lr_power: Any = 2.0,
    state_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `schedule_free_sgd`: `schedule_free(sgd(lr), lr, ...)` (after `add_decayed_weights`
    with a decay), `lr` warmed up by `warmup_constant_schedule(0, learning_rate, warmup_steps)` when given.

    Args:
      learning_rate: the SGD rate.
      warmup_steps: the length of the linear warmup (None: none).
      b1: the interpolation between `z` and its average `x`, in (0, 1].
      weight_decay: added to the gradient as `weight_decay * params` (None: none).
      weight_lr_power: the power of the rate in the averaging weights, >= 0.
      state_dtype: the dtype of `z` (None: each parameter's).

    Returns:
      A `GradientTransformation` with state `ScheduleFreeState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _contrib_schedule_free as contrib
        >>> tx = contrib.schedule_free_sgd(0.5, b1=0.5)
        >>> params = jnp.array([2.0])
        >>> tx.update(params, tx.init(params), params)[0]  # z = 2 - 0.5 * 2; x = z; y = 0.5 z + 0.5 x
        Array([-1.], dtype=float32)
    """
    learning_rate = _warmed_up(learning_rate, warmup_steps)
    optimizer = _optax.sgd(learning_rate)
    if weight_decay is not None:
        optimizer = _optax.chain(_optax.add_decayed_weights(weight_decay), optimizer)
    return schedule_free(optimizer, learning_rate, b1, weight_lr_power, state_dtype)


def schedule_free_adamw(
    learning_rate: Any = 0.0025,
    warmup_steps: int | None = None,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    weight_decay: Any = 0.0,
    weight_lr_power: Any = 2.0,
    state_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `schedule_free_adamw`: `schedule_free(chain(scale_by_rms(b2, eps, eps_in_sqrt=False,
    bias_correction=True), add_decayed_weights(weight_decay), scale_by_learning_rate(lr)), lr, ...)`.

    Args:
      learning_rate: the AdamW rate.
      warmup_steps: the length of the linear warmup (None: none).
      b1: the interpolation between `z` and its average `x`, in (0, 1].
      b2: the decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      weight_decay: added to the direction as `weight_decay * params` (then multiplied by the rate).
      weight_lr_power: the power of the rate in the averaging weights, >= 0.
      state_dtype: the dtype of `z` (None: each parameter's).

    Returns:
      A `GradientTransformation` with state `ScheduleFreeState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _contrib_schedule_free as contrib
        >>> tx = contrib.schedule_free_adamw(1.0, b1=0.5)
        >>> params = jnp.array([2.0])
        >>> tx.update(params, tx.init(params), params)[0].round(4)  # z = 2 - 1 * sign(2); x = z
        Array([-1.], dtype=float32)
    """
    learning_rate = _warmed_up(learning_rate, warmup_steps)
    optimizer = _optax.chain(
        _optax.scale_by_rms(decay=b2, eps=eps, eps_in_sqrt=False, bias_correction=True),
        _optax.add_decayed_weights(weight_decay),
        _optax.scale_by_learning_rate(learning_rate),
    )
    return schedule_free(optimizer, learning_rate, b1, weight_lr_power, state_dtype)
