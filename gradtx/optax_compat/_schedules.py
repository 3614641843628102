r"""optax's schedules (`optax.schedules`) under optax's names, signatures and defaults, with optax's numbers.

Where a gradtx schedule computes optax's numbers it is called with adapted arguments; the
rest is optax's arithmetic, op for op, on float32 counts kept from XLA's rewrites (`opaque`):
jitted, these give optax's eager numbers (optax's own jitted `exponential_decay` with
`staircase` can drop a period late, `polynomial_schedule` with `power=0.5` gives NaN at its
end). Arguments are refused only where optax refuses them; optax's fallbacks (constant
schedules for `transition_steps <= 0`, a negative `transition_begin` counted as 0) are kept.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import jax.numpy as jnp

from gradtx import schedules as gs
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import PI, Scalar, f32, number, opaque


def _api(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`_factory.api`, with the shared `Returns:` section filled in the docstring."""
    fn.__doc__ = (fn.__doc__ or "").replace(
        "{RETURNS}", "Returns:\n      A schedule `count -> float32 scalar`."
    )
    return _factory.api(fn)


__all__ = [
    "constant_schedule",
    "cosine_decay_schedule",
    "exponential_decay",
    "join_schedules",
    "linear_schedule",
    "piecewise_constant_schedule",
    "piecewise_interpolate_schedule",
    "polynomial_schedule",
]


@_api
def constant_schedule(value: Scalar) -> _protocol.Schedule:
    """The same value at every count. Equals `optax.constant_schedule` (as a float32 array).

    Args:
      value: the value to hold.

    {RETURNS}

    Example:
        >>> print(float(constant_schedule(0.5)(100)))
        0.5
    """
    return lambda count: f32(value)


@_api
def polynomial_schedule(
    init_value: Scalar, end_value: Scalar, power: Scalar, transition_steps: int, transition_begin: int = 0
) -> _protocol.Schedule:
    r"""From `init_value` to `end_value` along a polynomial, between counts `B` and `B + T`.

    .. math:: \eta(c) = (\eta_i - \eta_e)\,(1 - \min(\max(c - B, 0), T) / T)^{q} + \eta_e

    Equals `optax.polynomial_schedule`; `transition_steps <= 0`: the constant `init_value`.

    Args:
      init_value: :math:`\eta_i`, the value until count `B`.
      end_value: :math:`\eta_e`, the value from count `B + T` on.
      power: :math:`q`, the power of the polynomial (>= 0).
      transition_steps: :math:`T`, the length of the transition.
      transition_begin: :math:`B`, the count at which the transition starts (< 0: 0).

    {RETURNS}

    Example:
        >>> lr = polynomial_schedule(1.0, 0.0, power=2, transition_steps=4, transition_begin=1)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 3, 5, 9)])
        [1.0, 1.0, 0.25, 0.0, 0.0]
    """
    if transition_steps <= 0:
        return constant_schedule(init_value)
    begin = max(transition_begin, 0)
    factor = gs.polynomial_decay(1.0, transition_steps, 0.0, power)  # (1 - min(c, T) / T) ** q

    def schedule(count):
        return f32((init_value - end_value) * factor(jnp.maximum(jnp.asarray(count) - begin, 0)) + end_value)

    return schedule


@_api
def linear_schedule(
    init_value: Scalar, end_value: Scalar, transition_steps: int, transition_begin: int = 0
) -> _protocol.Schedule:
    r"""`polynomial_schedule` with `power=1`. Equals `optax.linear_schedule`.

    Args:
      init_value: the value until count `B`.
      end_value: the value from count `B + T` on.
      transition_steps: :math:`T`, the length of the transition.
      transition_begin: :math:`B`, the count at which the transition starts (< 0: 0).

    {RETURNS}

    Example:
        >>> lr = linear_schedule(1.0, 0.2, transition_steps=4)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 4, 8)])
        [1.0, 0.8, 0.6, 0.2, 0.2]
    """
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


@_api
def piecewise_constant_schedule(
    init_value: Scalar, boundaries_and_scales: Mapping[int, float] | None = None
) -> _protocol.Schedule:
    r"""`init_value` times the product of the scales whose boundary the count has reached.

    .. math:: \eta(c) = \eta_0 \prod_{b_i \le c} s_i

    Equals `optax.piecewise_constant_schedule` (TF's `gradtx.schedules.piecewise_constant` is a count later).

    Args:
      init_value: :math:`\eta_0`, the value before the first boundary.
      boundaries_and_scales: `{boundary: scale}` with scales >= 0, or None for a constant.

    {RETURNS}

    Raises:
      ValueError: for a negative (or NaN) scale, as optax.

    Example:
        >>> lr = piecewise_constant_schedule(1.0, {10: 0.1, 20: 0.5})
        >>> print([round(float(lr(c)), 4) for c in (0, 9, 10, 19, 20)])
        [1.0, 1.0, 0.1, 0.1, 0.05]
    """
    fn = "piecewise_constant_schedule"
    steps = sorted((boundaries_and_scales or {}).items())
    for boundary, scale in steps:
        if not scale >= 0.0:
            raise ValueError(
                f"`{_checks.api_name(fn)}`: the scales of `boundaries_and_scales` must be >= 0, "
                f"got {scale!r} at boundary {boundary!r}."
            )

    def schedule(count):
        value = f32(init_value)
        for boundary, scale in steps:  # optax's running product, one scale at a time
            value = jnp.where(jnp.asarray(count) >= boundary, value * scale, value)
        return value

    return schedule


@_api
def exponential_decay(
    init_value: Scalar,
    transition_steps: int,
    decay_rate: float,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value: Scalar | None = None,
) -> _protocol.Schedule:
    r"""`init_value` times `decay_rate` per `transition_steps` counts after count `B`, bounded by `end_value`.

    .. math:: \eta(c) = \eta_0\, k^{p}, \ p = \max(c - B, 0) / T (\lfloor\cdot\rfloor \text{ with staircase})

    Equals `optax.exponential_decay`; `end_value` bounds every count, even before `B`;
    `transition_steps <= 0` or `decay_rate == 0`: the constant `init_value`.

    Args:
      init_value: :math:`\eta_0`, the value until count `B`.
      transition_steps: :math:`T`, the counts per decay period.
      decay_rate: :math:`k`, the factor per period (>= 0).
      transition_begin: :math:`B`, the count at which the decay starts (< 0: 0).
      staircase: floor `p`, so that the value drops in steps.
      end_value: a lower bound when `decay_rate < 1`, else an upper bound; or None.

    {RETURNS}

    Example:
        >>> lr = exponential_decay(1.0, 10, 0.5, transition_begin=5, staircase=True, end_value=0.3)
        >>> print([round(float(lr(c)), 4) for c in (0, 14, 15, 25, 40)])
        [1.0, 1.0, 0.5, 0.3, 0.3]
    """
    if transition_steps <= 0 or decay_rate == 0:
        return constant_schedule(init_value)
    begin, staircase = max(transition_begin, 0), bool(staircase)  # k ** p, with p = 0 until B:
    factor = gs.exponential_decay(
        1.0, transition_steps, decay_rate, staircase=staircase, transition_begin=begin
    )
    bound = jnp.maximum if decay_rate < 1.0 else jnp.minimum

    def schedule(count):
        value = init_value * factor(count)
        return f32(value if end_value is None else bound(value, end_value))

    return schedule


@_api
def cosine_decay_schedule(
    init_value: Scalar, decay_steps: int, alpha: Scalar = 0.0, exponent: Scalar = 1.0
) -> _protocol.Schedule:
    r"""A (powered) half cosine from `init_value` down to `alpha * init_value` over `decay_steps` counts.

    .. math:: \eta(c) = \eta_0 \big((1 - \alpha) \big(\tfrac12 (1 + \cos(\pi \min(c, T) / T))\big)^{q}
        + \alpha\big)

    Equals `optax.cosine_decay_schedule` (any `alpha`: above 1 the value rises).

    Args:
      init_value: :math:`\eta_0`, the value at count 0.
      decay_steps: :math:`T`, the length of the decay (> 0).
      alpha: the final value as a fraction of `init_value`.
      exponent: :math:`q`, the power of the cosine factor.

    {RETURNS}

    Raises:
      ValueError: if `decay_steps <= 0`, as optax.

    Example:
        >>> lr = cosine_decay_schedule(1.0, 10, alpha=0.1)
        >>> print([round(float(lr(c)), 4) for c in (0, 5, 10, 20)])
        [1.0, 0.55, 0.1, 0.1]
    """
    number("cosine_decay_schedule", "decay_steps", decay_steps, _checks.check_positive)

    def schedule(count):
        step, steps = opaque(count, decay_steps)
        cosine = 0.5 * (1 + jnp.cos(PI * jnp.minimum(step, steps) / steps))
        return f32(init_value * ((1 - alpha) * cosine**exponent + alpha))

    return schedule


@_api
def join_schedules(schedules: Sequence[_protocol.Schedule], boundaries: Sequence[int]) -> _protocol.Schedule:
    """`schedules[i]`, restarted at count 0, from `boundaries[i - 1]` on.

    Equals `optax.join_schedules` (`gradtx.schedules.join_schedules`).

    Args:
      schedules: the schedules, in the order they run.
      boundaries: the counts at which the next schedule takes over (one fewer, non-decreasing).

    {RETURNS}

    Example:
        >>> lr = join_schedules([constant_schedule(1.0), linear_schedule(1.0, 0.0, 4)], [2])
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 3, 6)])
        [1.0, 1.0, 1.0, 0.75, 0.0]
    """
    return gs.join_schedules(schedules, boundaries)


@_api
def piecewise_interpolate_schedule(
    interpolate_type: str, init_value: Scalar, boundaries_and_scales: Mapping[int, float] | None = None
) -> _protocol.Schedule:
    """From one boundary's accumulated value to the next's, linearly or along a cosine.

    Equals `optax.piecewise_interpolate_schedule` (`gradtx.schedules.piecewise_interpolate`).

    Args:
      interpolate_type: "linear" or "cosine".
      init_value: the value at count 0 (>= 0).
      boundaries_and_scales: `{boundary: scale}`: the value reaches the previous value
        times `scale` at `boundary` (scales >= 0), or None for a constant.

    {RETURNS}

    Example:
        >>> lr = piecewise_interpolate_schedule("linear", 1.0, {4: 0.1, 8: 0.01})
        >>> print([round(float(lr(c)), 6) for c in (0, 2, 4, 6, 8, 10)])
        [1.0, 0.55, 0.1, 0.0505, 0.001, 0.001]
    """
    return gs.piecewise_interpolate(interpolate_type, init_value, boundaries_and_scales)
