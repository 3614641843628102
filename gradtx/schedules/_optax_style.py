"""optax's composite schedules: warmup then cosine or exponential decay, one-cycle (cosine, linear), SGDR."""

from __future__ import annotations

import inspect
from typing import Any, Mapping, Sequence

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import PI, Scalar, f32, number
from gradtx.schedules._decay import exponential_decay
from gradtx.schedules._join import join_schedules, piecewise_interpolate
from gradtx.schedules._warmup import linear_warmup


def _check_values(fn: str, **values: Any) -> None:
    for name, value in values.items():
        number(fn, name, value, _checks.check_nonnegative)


def _cosine_to(peak: Any, steps: int, end: Any, exponent: Any) -> _protocol.Schedule:
    """optax's `cosine_decay_schedule(peak, steps, alpha=end / peak, exponent)` (alpha 0 for a zero peak)."""

    def schedule(count):
        c = jnp.minimum(f32(count), steps)
        p, e = f32(peak), f32(end)
        alpha = jnp.where(p == 0, 0.0, e / jnp.where(p == 0, 1.0, p))
        cosine = 0.5 * (1.0 + jnp.cos(PI * c / steps))
        return p * ((1.0 - alpha) * cosine ** f32(exponent) + alpha)

    return schedule


@_factory.api
def warmup_cosine_decay(
    init_value: Scalar,
    peak_value: Scalar,
    warmup_steps: int,
    decay_steps: int,
    end_value: Scalar = 0.0,
    exponent: Scalar = 1.0,
) -> _protocol.Schedule:
    r"""Ramp linearly from `init_value` to `peak_value`, then follow a cosine down to `end_value`.

    .. math::
        \eta(c) = \begin{cases} \eta_i + (\eta_p - \eta_i)\, c / w & c < w \\
            \eta_e + (\eta_p - \eta_e) \big(\tfrac12 (1 + \cos(\pi \min(c - w, T) / T))\big)^{q}
                & c \ge w \end{cases}, \quad T = d - w

    `optax.warmup_cosine_decay_schedule` (SGDR's cosine after Goyal et al.'s warmup).
    `decay_steps` counts the warmup too: the value reaches `end_value` at count `d` and
    stays there.

    Args:
      init_value: :math:`\eta_i`, the value at count 0 (>= 0).
      peak_value: :math:`\eta_p`, the value at the end of the warmup (>= 0).
      warmup_steps: :math:`w`, the length of the warmup (an int >= 0).
      decay_steps: :math:`d`, the length of the whole schedule, warmup included (an int > `warmup_steps`).
      end_value: :math:`\eta_e`, the final value (>= 0).
      exponent: :math:`q`, the power of the cosine factor (> 0).

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a non-number value or non-int steps.
      ValueError: for a negative or non-finite value, `exponent <= 0` or `decay_steps <= warmup_steps`.

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.warmup_cosine_decay(0.0, 1.0, warmup_steps=2, decay_steps=6, end_value=0.1)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 4, 6, 9)])
        [0.0, 0.5, 1.0, 0.55, 0.1, 0.1]

    References:
      Loshchilov & Hutter, SGDR: Stochastic Gradient Descent with Warm Restarts, ICLR 2017.
      Goyal et al., Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour, 2017.
    """
    fn = "warmup_cosine_decay"
    _check_values(fn, init_value=init_value, peak_value=peak_value, end_value=end_value)
    number(fn, "exponent", exponent, _checks.check_positive)
    _checks.check_int(fn, "warmup_steps", warmup_steps, minimum=0)
    _checks.check_int(fn, "decay_steps", decay_steps)
    if decay_steps <= warmup_steps:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `decay_steps` must be > `warmup_steps` (it counts the warmup too), "
            f"got decay_steps={decay_steps} and warmup_steps={warmup_steps}."
        )
    ramp = linear_warmup(peak_value, warmup_steps, init_value=init_value)
    return join_schedules(
        [ramp, _cosine_to(peak_value, decay_steps - warmup_steps, end_value, exponent)], [warmup_steps]
    )


@_factory.api
def warmup_exponential_decay(
    init_value: Scalar,
    peak_value: Scalar,
    warmup_steps: int,
    transition_steps: Scalar,
    decay_rate: Scalar,
    *,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value: Scalar | None = None,
) -> _protocol.Schedule:
    r"""Ramp linearly from `init_value` to `peak_value`, then decay exponentially (`exponential_decay`).

    .. math::
        \eta(c) = \begin{cases} \eta_i + (\eta_p - \eta_i)\, c / w & c < w \\
            \eta_p\, k^{\max(c - w - b, 0) / d} \ (\text{bounded by } \eta_e) & c \ge w \end{cases}

    `optax.warmup_exponential_decay_schedule`: after the warmup, `exponential_decay`
    starts from `peak_value` at count 0 (its own count: the steps since the warmup).

    Args:
      init_value: :math:`\eta_i`, the value at count 0 (>= 0).
      peak_value: :math:`\eta_p`, the value at the end of the warmup (>= 0).
      warmup_steps: :math:`w`, the length of the warmup (an int >= 0).
      transition_steps: :math:`d`, the number of steps per decay period (> 0).
      decay_rate: :math:`k`, the decay per period (>= 0).
      transition_begin: :math:`b`, the steps after the warmup before the decay starts (an int >= 0).
      staircase: floor the exponent, so that the value drops in steps.
      end_value: :math:`\eta_e`, where the decay stops (a lower bound when `decay_rate < 1`,
        an upper bound otherwise), or None.

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a non-number value, non-int steps or a non-bool `staircase`.
      ValueError: for a value out of its range or not finite.

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.warmup_exponential_decay(0.0, 1.0, 2, transition_steps=2, decay_rate=0.5)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 4, 6)])
        [0.0, 0.5, 1.0, 0.5, 0.25]

    References:
      Goyal et al., Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour, 2017.
    """
    fn = "warmup_exponential_decay"
    _check_values(fn, init_value=init_value, peak_value=peak_value)
    _checks.check_int(fn, "warmup_steps", warmup_steps, minimum=0)
    number(
        fn, "transition_steps", transition_steps, _checks.check_positive
    )  # `decay_steps` to exponential_decay
    decay = exponential_decay(
        peak_value,
        transition_steps,
        decay_rate,
        staircase=staircase,
        transition_begin=transition_begin,
        end_value=end_value,
    )
    return join_schedules(
        [linear_warmup(peak_value, warmup_steps, init_value=init_value), decay], [warmup_steps]
    )


def _check_onecycle(fn: str, transition_steps: Any, peak_value: Any, pct_start: Any, **factors: Any) -> None:
    _checks.check_int(fn, "transition_steps", transition_steps, minimum=1)
    _check_values(fn, peak_value=peak_value)
    number(fn, "pct_start", pct_start)
    _checks.check_in_range(fn, "pct_start", pct_start, 0.0, 1.0)
    for name, value in factors.items():
        number(fn, name, value, _checks.check_positive)


@_factory.api
def cosine_onecycle(
    transition_steps: int,
    peak_value: Scalar,
    pct_start: Scalar = 0.3,
    div_factor: Scalar = 25.0,
    final_div_factor: Scalar = 1e4,
) -> _protocol.Schedule:
    r"""One cycle: up from `peak_value / div_factor` to `peak_value` and down far below it, along cosines.

    With :math:`T` = `transition_steps`, :math:`\eta_0 = \eta_p / \delta`: a cosine from
    :math:`\eta_0` to :math:`\eta_p` over the first `int(pct_start * T)` steps, then a
    cosine down to :math:`\eta_0 / \delta_f` at step :math:`T`, constant after:
    `optax.cosine_onecycle_schedule` (`piecewise_interpolate("cosine", ...)`).

    Args:
      transition_steps: :math:`T`, the length of the cycle (an int >= 1).
      peak_value: :math:`\eta_p`, the largest value (>= 0).
      pct_start: the fraction of the cycle spent going up, in [0, 1].
      div_factor: :math:`\delta`, the initial value is `peak_value / div_factor` (> 0).
      final_div_factor: :math:`\delta_f`, the final value is the initial one divided by it (> 0).

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a non-number argument or a non-int `transition_steps`.
      ValueError: for an argument out of its range or not finite.

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.cosine_onecycle(10, 1.0, pct_start=0.2, div_factor=10.0, final_div_factor=100.0)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 6, 10)])
        [0.1, 0.55, 1.0, 0.5005, 0.001]

    References:
      Smith & Topin, Super-Convergence: Very Fast Training of Neural Networks Using Large Learning
      Rates, 2017.
    """
    fn = "cosine_onecycle"
    _check_onecycle(
        fn, transition_steps, peak_value, pct_start, div_factor=div_factor, final_div_factor=final_div_factor
    )
    return piecewise_interpolate(
        "cosine",
        peak_value / div_factor,
        {
            int(pct_start * transition_steps): div_factor,
            int(transition_steps): 1.0 / (div_factor * final_div_factor),
        },
    )


@_factory.api
def linear_onecycle(
    transition_steps: int,
    peak_value: Scalar,
    pct_start: Scalar = 0.3,
    pct_final: Scalar = 0.85,
    div_factor: Scalar = 25.0,
    final_div_factor: Scalar = 1e4,
) -> _protocol.Schedule:
    r"""One cycle in three straight lines: up to `peak_value`, back down, then far below the start.

    With :math:`T` = `transition_steps`, :math:`\eta_0 = \eta_p / \delta`: linearly from
    :math:`\eta_0` to :math:`\eta_p` until `int(pct_start * T)`, back to :math:`\eta_0`
    at `int(pct_final * T)`, then to :math:`\eta_0 / \delta_f` at :math:`T`, constant
    after: `optax.linear_onecycle_schedule` (`piecewise_interpolate("linear", ...)`).

    Args:
      transition_steps: :math:`T`, the length of the cycle (an int >= 1).
      peak_value: :math:`\eta_p`, the largest value (>= 0).
      pct_start: the fraction of the cycle spent going up, in [0, 1].
      pct_final: the fraction of the cycle at which the value is back at the start, in [`pct_start`, 1].
      div_factor: :math:`\delta`, the initial value is `peak_value / div_factor` (> 0).
      final_div_factor: :math:`\delta_f`, the final value is the initial one divided by it (> 0).

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a non-number argument or a non-int `transition_steps`.
      ValueError: for an argument out of its range or not finite, or `pct_final < pct_start`.

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.linear_onecycle(10, 1.0, 0.2, 0.6, div_factor=10.0, final_div_factor=100.0)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 4, 6, 10)])
        [0.1, 0.55, 1.0, 0.55, 0.1, 0.001]

    References:
      Smith & Topin, Super-Convergence: Very Fast Training of Neural Networks Using Large Learning
      Rates, 2017.
    """
    fn = "linear_onecycle"
    _check_onecycle(
        fn, transition_steps, peak_value, pct_start, div_factor=div_factor, final_div_factor=final_div_factor
    )
    number(fn, "pct_final", pct_final)
    _checks.check_in_range(fn, "pct_final", pct_final, 0.0, 1.0)
    if pct_final < pct_start:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `pct_final` must be >= `pct_start`, got pct_final={pct_final!r} "
            f"and pct_start={pct_start!r}."
        )
    return piecewise_interpolate(
        "linear",
        peak_value / div_factor,
        {
            int(pct_start * transition_steps): div_factor,
            int(pct_final * transition_steps): 1.0 / div_factor,
            transition_steps: 1.0 / final_div_factor,
        },
    )


_COSINE_ARGS = tuple(inspect.signature(warmup_cosine_decay).parameters)


@_factory.api
def sgdr(cosine_kwargs: Sequence[Mapping[str, Any]]) -> _protocol.Schedule:
    r"""SGD with warm restarts: `warmup_cosine_decay` cycles one after another, each from its own count 0.

    Cycle :math:`j` is `warmup_cosine_decay(**cosine_kwargs[j])` and lasts its
    `decay_steps` steps; `join_schedules` puts them end to end: `optax.sgdr_schedule`.

    Args:
      cosine_kwargs: one dict of `warmup_cosine_decay` arguments per cycle (`init_value`,
        `peak_value`, `warmup_steps`, `decay_steps`, optionally `end_value`, `exponent`).

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a non-list, a non-dict cycle, or unknown or missing keys.
      ValueError: for a cycle whose arguments `warmup_cosine_decay` refuses.

    Example:
        >>> from gradtx import schedules
        >>> cycle = {"init_value": 0.0, "peak_value": 1.0, "warmup_steps": 1, "decay_steps": 3}
        >>> lr = schedules.sgdr([cycle, {**cycle, "peak_value": 0.5}])
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 3, 4, 5)])
        [0.0, 1.0, 0.5, 0.0, 0.5, 0.25]

    References:
      Loshchilov & Hutter, SGDR: Stochastic Gradient Descent with Warm Restarts, ICLR 2017.
    """
    fn = "sgdr"
    if not isinstance(cosine_kwargs, (list, tuple)) or not cosine_kwargs:
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `cosine_kwargs` must be a non-empty list of dicts (one per cycle), "
            f"got {cosine_kwargs!r}."
        )
    cycles, boundaries, step = [], [], 0
    required = {"init_value", "peak_value", "warmup_steps", "decay_steps"}
    for i, kwargs in enumerate(cosine_kwargs):
        where = f"`{_checks.api_name(fn)}`: `cosine_kwargs[{i}]`"
        if not isinstance(kwargs, Mapping):
            raise TypeError(f"{where} must be a dict of `warmup_cosine_decay` arguments, got {kwargs!r}.")
        unknown, missing = sorted(set(kwargs) - set(_COSINE_ARGS)), sorted(required - set(kwargs))
        if unknown or missing:
            problems = [f"unknown keys {unknown}"] * bool(unknown) + [f"no {missing}"] * bool(missing)
            raise TypeError(
                f"{where} has {' and '.join(problems)}; `warmup_cosine_decay` takes {list(_COSINE_ARGS)}."
            )
        try:
            cycles.append(warmup_cosine_decay(**kwargs))
        except (TypeError, ValueError) as err:
            detail = str(err).removeprefix(f"`{_checks.api_name(fn)}`: ")
            raise type(err)(f"{where}: {detail}") from None
        step += int(kwargs["decay_steps"])
        boundaries.append(step)
    return join_schedules(cycles, boundaries[:-1])
