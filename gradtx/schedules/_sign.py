r"""Sign decays for AddSign and PowerSign (tf.contrib.opt's `sign_decay.py`): linear, cosine, restart.

Each returns `schedule(count) -> float32 scalar`, to pass as `sign_decay` to
`scale_by_addsign` / `scale_by_powersign`, which call it with `count = t-1` inside step t
(TF's `global_step` before its increment). The arithmetic is contrib's, op for op.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import PI, Scalar, doc, f32, number, opaque


def _check_steps(fn: str, decay_steps: Any) -> None:
    _checks.check_int(fn, "decay_steps", decay_steps)
    _checks.check_positive(fn, "decay_steps", decay_steps)


def _check_zero_after(fn: str, zero_after: Any) -> None:
    if zero_after is not None:
        number(fn, "zero_after", zero_after, _checks.check_nonnegative)


def _clamped(count: Any, decay_steps: int) -> Any:
    """contrib's `minimum(global_step, decay_steps)`, in the count's own (integer) type."""
    return jnp.minimum(jnp.asarray(count), decay_steps)


@doc
@_factory.api
def linear_sign_decay(decay_steps: int) -> _protocol.Schedule:
    r"""Linear sign decay: from 1 at count 0 to 0 at `decay_steps`, then 0.

    .. math:: d(c) = \max\big(0,\ (d - \min(c, d)) / d\big)

    As contrib's `get_linear_decay_fn`: the difference is taken in int32, then divided in
    float32.

    Args:
      decay_steps: the number of steps to decay over, `d` (an int > 0).

    {RETURNS_RAISES}

    Example:
        >>> from gradtx.schedules import linear_sign_decay
        >>> decay = linear_sign_decay(4)
        >>> print([float(decay(c)) for c in range(6)])
        [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]

    References:
      Bello et al., Neural Optimizer Search with Reinforcement Learning, ICML 2017.
      TensorFlow, `tf.contrib.opt.python.training.sign_decay.get_linear_decay_fn`.
    """
    _check_steps("linear_sign_decay", decay_steps)

    def schedule(count):
        # contrib: to_int32(decay_steps) - to_int32(global_step), then to_float / to_float
        remaining = decay_steps - _clamped(count, decay_steps).astype(jnp.int32)
        remaining, steps = opaque(remaining, decay_steps)
        return jnp.maximum(f32(0.0), remaining / steps)

    return schedule


@doc
@_factory.api
def cosine_sign_decay(
    decay_steps: int, num_periods: Scalar = 0.5, zero_after: Scalar | None = None
) -> _protocol.Schedule:
    r"""Cosine sign decay: `num_periods` cosine periods over `decay_steps`, constant after.

    .. math:: f = 2n\,\min(c, d)/d, \quad d(c) = \tfrac12\big(1 + \cos(\pi f)\big),
        \quad d(c) = 0 \text{ if } f \ge 2z

    The last case applies only when `zero_after` (`z`) is given. With the default
    `num_periods=0.5` the decay falls from 1 to 0 over `decay_steps`. As in contrib,
    `2 * num_periods` and `2 * zero_after` are formed in Python before the cast to float32.

    Args:
      decay_steps: the number of steps to decay over, `d` (an int > 0).
      num_periods: the number of cosine periods over `decay_steps`, `n` (> 0).
      zero_after: None, or a number `z` >= 0: the decay is 0 once `f >= 2z`.

    {RETURNS_RAISES}

    Example:
        >>> from gradtx.schedules import cosine_sign_decay
        >>> decay = cosine_sign_decay(8, num_periods=1.0, zero_after=0.75)
        >>> print([round(float(decay(c)), 6) for c in (0, 2, 4, 5, 6, 8, 9)])
        [1.0, 0.5, 0.0, 0.146447, 0.0, 0.0, 0.0]

    References:
      Bello et al., Neural Optimizer Search with Reinforcement Learning, ICML 2017.
      TensorFlow, `tf.contrib.opt.python.training.sign_decay.get_cosine_decay_fn`.
    """
    fn = "cosine_sign_decay"
    _check_steps(fn, decay_steps)
    number(fn, "num_periods", num_periods, _checks.check_positive)
    _check_zero_after(fn, zero_after)
    two_n = 2.0 * num_periods  # contrib: `2.0 * num_periods * completed_fraction`, left to right
    two_z = None if zero_after is None else 2 * zero_after

    def schedule(count):
        step, steps, tn = opaque(_clamped(count, decay_steps), decay_steps, two_n)
        fraction = tn * (step / steps)
        decayed = 0.5 * (1.0 + jnp.cos(PI * fraction))
        if two_z is not None:
            decayed = jnp.where(fraction >= f32(two_z), f32(0.0), decayed)
        return decayed

    return schedule


@doc
@_factory.api
def restart_sign_decay(
    decay_steps: int, num_periods: Scalar = 1, zero_after: Scalar | None = None
) -> _protocol.Schedule:
    r"""Restart sign decay: a cosine from 1 to 0 restarted `num_periods` times over `decay_steps`.

    .. math:: c' = \min(c, d), \quad r = (n c') \bmod d, \quad d(c) = \tfrac12\big(1 + \cos(\pi r / d)\big),
        \quad d(c) = 0 \text{ if } n c'/d \ge z

    The last case applies only when `zero_after` (`z`) is given. As in contrib, the count
    is clamped to `decay_steps` *before* the (floor) modulo: past `decay_steps` an integer
    `num_periods` gives `r = 0`, so the decay returns to 1 and stays there (unless
    `zero_after` is at most `num_periods`). contrib computes the `zero_after` test as
    `to_float(num_periods * global_step)`, which fails in TF for a non-integer
    `num_periods`; here the product is taken in float32 (the same value for integers).

    Args:
      decay_steps: the number of steps to decay over, `d` (an int > 0).
      num_periods: the number of restarts over `decay_steps`, `n` (> 0).
      zero_after: None, or a number `z` >= 0: the decay is 0 once `n c'/d >= z`.

    {RETURNS_RAISES}

    Example:
        >>> from gradtx.schedules import restart_sign_decay
        >>> decay = restart_sign_decay(8, num_periods=2)
        >>> print([round(float(decay(c)), 6) for c in (0, 2, 3, 4, 6, 8, 20)])
        [1.0, 0.5, 0.146447, 1.0, 0.5, 1.0, 1.0]

    References:
      Loshchilov & Hutter, SGDR: Stochastic Gradient Descent with Warm Restarts, ICLR 2017.
      TensorFlow, `tf.contrib.opt.python.training.sign_decay.get_restart_decay_fn`.
    """
    fn = "restart_sign_decay"
    _check_steps(fn, decay_steps)
    number(fn, "num_periods", num_periods, _checks.check_positive)
    _check_zero_after(fn, zero_after)

    def schedule(count):
        step, steps, n = opaque(_clamped(count, decay_steps), decay_steps, num_periods)
        periods = n * step
        fraction = jnp.mod(periods, steps) / steps  # floormod, as math_ops.mod
        decayed = 0.5 * (1.0 + jnp.cos(PI * fraction))
        if zero_after is not None:
            decayed = jnp.where(periods / steps >= f32(zero_after), f32(0.0), decayed)
        return decayed

    return schedule
