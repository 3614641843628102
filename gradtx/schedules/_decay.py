"""Step-count decays: exponential, natural-exponential, inverse-time, polynomial, piecewise-constant."""

from __future__ import annotations

import math
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import Scalar, check_decay, doc, f32, held, number, opaque


def _p_decay(
    fn, learning_rate, decay_steps, decay_rate, staircase, rule, rate=None, begin=0, end=None
) -> _protocol.Schedule:
    """A schedule `rule(lr, rate, p)` of `p = max(count - begin, 0) / decay_steps`, floored with `staircase`,
    bounded by `end` (below when `rate < 1`, above otherwise) when given."""
    check_decay(fn, learning_rate, "decay_steps", decay_steps, decay_rate=decay_rate)
    _checks.check_bool(fn, "staircase", staircase)
    rate = decay_rate if rate is None else rate(decay_rate)

    def schedule(count):
        if begin:  # in the count's own type (exact for int counts), before the float32 cast
            count = jnp.maximum(jnp.asarray(count) - begin, 0)
        step, lr, steps, k = opaque(count, learning_rate, decay_steps, rate)
        p = jnp.floor(step / steps) if staircase else step / steps
        value = rule(lr, k, p)
        if end is not None:
            bound = f32(end)
            value = jnp.where(k < 1, jnp.maximum(value, bound), jnp.minimum(value, bound))
        return value

    return schedule


@doc
@_factory.api
def exponential_decay(
    learning_rate: Scalar,
    decay_steps: Scalar,
    decay_rate: Scalar,
    *,
    staircase: bool = False,
    transition_begin: int = 0,
    end_value: Scalar | None = None,
) -> _protocol.Schedule:
    r"""Exponential decay: the rate is multiplied by `decay_rate` every `decay_steps` steps.

    .. math:: \eta(c) = \eta_0 \, k^{p}, \quad p = c'/d \ \ (\lfloor c'/d \rfloor \text{ with staircase}),
        \quad c' = \max(c - b, 0)

    With the defaults (`transition_begin=0`, no `end_value`) this is TF's schedule, op for
    op. optax's two options (`optax.exponential_decay`): the decay starts after
    `transition_begin` steps `b` (the rate holds at `learning_rate` until then), and stops
    at `end_value`, a lower bound when `decay_rate < 1`, an upper bound otherwise.

    Args:
      learning_rate: the initial learning rate (>= 0).
      decay_steps: the number of steps per decay period, `d` (> 0).
      decay_rate: the decay per period, `k` (>= 0).
      staircase: floor `count / decay_steps`, so that the rate drops in steps.
      transition_begin: the number of steps `b` before the decay starts (an int >= 0).
      end_value: the value the decay stops at (>= 0), or None for no bound.

    {RETURNS_RAISES}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.exponential_decay(0.1, 10, 0.5, staircase=True)
        >>> print([round(float(lr(c)), 6) for c in (0, 9, 10, 25)])
        [0.1, 0.1, 0.05, 0.025]
        >>> late = schedules.exponential_decay(0.1, 10, 0.5, transition_begin=5, end_value=0.04)
        >>> print([round(float(late(c)), 6) for c in (0, 5, 15, 40)])
        [0.1, 0.1, 0.05, 0.04]

    References:
      TensorFlow, `tf.compat.v1.train.exponential_decay`; optax, `optax.exponential_decay`.
    """
    fn = "exponential_decay"
    _checks.check_int(fn, "transition_begin", transition_begin, minimum=0)
    if end_value is not None:
        number(fn, "end_value", end_value, _checks.check_nonnegative)
    return _p_decay(
        fn,
        learning_rate,
        decay_steps,
        decay_rate,
        staircase,
        lambda lr, k, p: lr * jnp.power(k, p),
        begin=transition_begin,
        end=end_value,
    )


def _exp_neg(k: Any) -> Any:
    """TF's `exp(-float32(k))`, for a known `k` in float64 rounded to float32.

    TF's scalar `expf` (libm) is within 0.502 ulp of that; XLA's `exp` is 1 ulp off for ~10% of inputs.
    """
    if isinstance(k, jax.core.Tracer):
        return held(jnp.exp(-f32(k)))
    return np.float32(math.exp(-float(np.float32(k))))


@doc
@_factory.api
def natural_exp_decay(
    learning_rate: Scalar, decay_steps: Scalar, decay_rate: Scalar, *, staircase: bool = False
) -> _protocol.Schedule:
    r"""Natural exponential decay: `exponential_decay` with the factor `exp(-decay_rate)`.

    .. math:: \eta(c) = \eta_0 \, (e^{-k})^{p}, \quad p = c/d \ \ (\lfloor c/d \rfloor \text{ with staircase})

    As in TF, the float32 factor `exp(-k)` is raised to the power `p` (not `exp(-k p)`).

    {P_ARGS}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.natural_exp_decay(1.0, 1, 0.5)
        >>> print(round(float(lr(2)), 5))
        0.36788

    References:
      TensorFlow, `tf.compat.v1.train.natural_exp_decay`.
    """
    return _p_decay(
        "natural_exp_decay",
        learning_rate,
        decay_steps,
        decay_rate,
        staircase,
        lambda lr, base, p: lr * jnp.power(base, p),
        rate=_exp_neg,
    )


@doc
@_factory.api
def inverse_time_decay(
    learning_rate: Scalar, decay_steps: Scalar, decay_rate: Scalar, *, staircase: bool = False
) -> _protocol.Schedule:
    r"""Inverse time decay: the rate falls like `1 / (1 + decay_rate * p)`.

    .. math:: \eta(c) = \eta_0 / (1 + k\,p), \quad p = c/d \ \ (\lfloor c/d \rfloor \text{ with staircase})

    {P_ARGS}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.inverse_time_decay(0.1, 10, 1.0)
        >>> print(round(float(lr(10)), 6), round(float(lr(30)), 6))
        0.05 0.025

    References:
      TensorFlow, `tf.compat.v1.train.inverse_time_decay`.
    """
    return _p_decay(
        "inverse_time_decay",
        learning_rate,
        decay_steps,
        decay_rate,
        staircase,
        lambda lr, k, p: lr / (1.0 + k * p),
    )


def _numbers(fn: str, name: str, value: Any) -> list[Any]:
    if isinstance(value, (np.ndarray, jax.Array)) and np.ndim(value) == 1:
        value = list(value)
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"`{_checks.api_name(fn)}`: `{name}` must be a list of numbers, got {value!r}.")
    for i, v in enumerate(value):
        number(fn, f"{name}[{i}]", v)
    return list(value)


@_factory.api
def piecewise_constant(boundaries: Sequence[Scalar], values: Sequence[Scalar]) -> _protocol.Schedule:
    r"""A constant rate on each interval between step boundaries.

    .. math:: \eta(c) = v_0 \text{ if } c \le b_0;\ \ v_{i+1} \text{ if } b_i < c \le b_{i+1};\ \
        v_n \text{ if } c > b_{n-1}

    An int count is compared exactly: with int boundaries as ints, with a float boundary
    as TF compares a float32 step with it (`c <= b` iff `c <= floor(float32(b))`).

    Args:
      boundaries: `n` strictly increasing step boundaries (ints or floats).
      values: the `n + 1` values, one per interval.

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: if `boundaries` or `values` is not a list of numbers.
      ValueError: if `boundaries` is not strictly increasing or not one element shorter than `values`.

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.piecewise_constant([10, 20], [1.0, 0.5, 0.1])
        >>> print([round(float(lr(c)), 6) for c in (0, 10, 11, 20, 21)])
        [1.0, 1.0, 0.5, 0.5, 0.1]

    References:
      TensorFlow, `tf.compat.v1.train.piecewise_constant`.
    """
    fn = "piecewise_constant"
    boundaries, values = _numbers(fn, "boundaries", boundaries), _numbers(fn, "values", values)
    if any(isinstance(b, jax.core.Tracer) for b in boundaries):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `boundaries` must be known at construction, got a tracer."
        )
    if any(not b0 < b1 for b0, b1 in zip(boundaries[:-1], boundaries[1:], strict=True)):
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `boundaries` must be strictly increasing, got {boundaries}."
        )
    if len(values) != len(boundaries) + 1:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `values` must have one element more than `boundaries` (the length of "
            f"boundaries should be 1 less than the length of values), got {len(boundaries)} boundaries "
            f"and {len(values)} values."
        )
    as_int = [
        int(b) if np.issubdtype(np.asarray(b).dtype, np.integer) else math.floor(np.float32(b))
        for b in boundaries
    ]
    info = np.iinfo(np.int32)
    b_int = np.clip(np.asarray(as_int, np.int64), info.min, info.max).astype(np.int32)
    b_f32 = np.asarray(boundaries, np.float32)

    def schedule(count):
        c = jnp.asarray(count)
        passed = c > b_int if jnp.issubdtype(c.dtype, jnp.integer) else f32(c) > b_f32
        return jnp.stack([f32(v) for v in values])[jnp.sum(passed, dtype=jnp.int32)]

    return schedule


@doc
@_factory.api
def polynomial_decay(
    learning_rate: Scalar,
    decay_steps: Scalar,
    end_learning_rate: Scalar = 0.0001,
    power: Scalar = 1.0,
    *,
    cycle: bool = False,
) -> _protocol.Schedule:
    r"""Polynomial decay from `learning_rate` to `end_learning_rate` over `decay_steps` steps.

    .. math:: \eta(c) = (\eta_0 - \eta_e)\,(1 - c'/d')^{q} + \eta_e

    Without `cycle`: `c' = min(c, d)`, `d' = d`. With `cycle`: `c' = c` and
    `d' = d * (1 if c == 0 else ceil(c/d))`, so the decay restarts every `d` steps.

    Args:
      learning_rate: the initial learning rate (>= 0).
      decay_steps: the number of steps to decay over, `d` (> 0).
      end_learning_rate: the final rate, `eta_e` (>= 0).
      power: the exponent `q` (>= 0).
      cycle: restart the decay every `decay_steps` steps instead of staying at the end.

    {RETURNS_RAISES}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.polynomial_decay(1.0, 10, end_learning_rate=0.0, power=2.0)
        >>> print([round(float(lr(c)), 6) for c in (0, 5, 10, 20)])
        [1.0, 0.25, 0.0, 0.0]

    References:
      TensorFlow, `tf.compat.v1.train.polynomial_decay`.
    """
    fn = "polynomial_decay"
    check_decay(
        fn, learning_rate, "decay_steps", decay_steps, end_learning_rate=end_learning_rate, power=power
    )
    _checks.check_bool(fn, "cycle", cycle)

    def schedule(count):  # TF PolynomialDecay.__call__
        step, lr, steps, end, q = opaque(count, learning_rate, decay_steps, end_learning_rate, power)
        if cycle:
            steps = steps * jnp.where(step == 0, 1.0, jnp.ceil(step / steps))
        else:
            step = jnp.minimum(step, steps)
        return (lr - end) * jnp.power(1.0 - step / steps, q) + end

    return schedule
