"""Schedules made of pieces: `join_schedules` (one after another), `piecewise_interpolate`."""

from __future__ import annotations

import numbers
from typing import Any, Mapping, Sequence

import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import PI, Scalar, f32, number


def _value(schedule: Any, count: Any) -> Any:
    """A piece's value at `count`: a schedule is called, a number is constant."""
    return f32(schedule(count) if _checks.is_schedule(schedule) else schedule)


def _step_ints(fn: str, name: str, values: Any) -> list[int]:
    """`values` as a list of ints >= 0 (step counts known at construction)."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"`{_checks.api_name(fn)}`: `{name}` must be a list of ints, got {values!r}.")
    for i, v in enumerate(values):
        _checks.check_int(fn, f"{name}[{i}]", v, minimum=0)
    return [int(v) for v in values]


@_factory.api
def join_schedules(
    schedules: Sequence[_protocol.ScalarOrSchedule], boundaries: Sequence[int]
) -> _protocol.Schedule:
    r"""Follow `schedules[0]` until `boundaries[0]`, then `schedules[1]` restarted at 0, and so on.

    .. math:: \eta(c) = s_i(c - b_{i-1}) \quad \text{for } b_{i-1} \le c < b_i \quad (b_{-1} = 0)

    `optax.join_schedules`: each schedule sees the number of steps since its own start.
    A piece may be a constant number instead of a schedule.

    Args:
      schedules: `n` schedules (`count -> value`) or numbers, in the order they run.
      boundaries: the `n - 1` steps at which the next one takes over (non-decreasing ints >= 0).

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a piece that is neither a schedule nor a number, or non-int boundaries.
      ValueError: for boundaries that decrease or do not number one fewer than the schedules.

    Example:
        >>> from gradtx import schedules
        >>> warmup, decay = schedules.linear_warmup(1.0, 4), schedules.cosine_decay(1.0, 8)
        >>> lr = schedules.join_schedules([warmup, decay], [4])
        >>> print([round(float(lr(c)), 4) for c in (0, 2, 4, 8, 12, 20)])
        [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    """
    fn = "join_schedules"
    if not isinstance(schedules, (list, tuple)) or not schedules:
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `schedules` must be a non-empty list of schedules, got {schedules!r}."
        )
    for i, s in enumerate(schedules):
        if not _checks.is_schedule(s):
            number(fn, f"schedules[{i}]", s)
    bounds = _step_ints(fn, "boundaries", boundaries)
    if len(bounds) != len(schedules) - 1:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `boundaries` must have one element fewer than `schedules`, got "
            f"{len(bounds)} boundaries and {len(schedules)} schedules."
        )
    if any(b1 < b0 for b0, b1 in zip(bounds[:-1], bounds[1:], strict=True)):
        raise ValueError(f"`{_checks.api_name(fn)}`: `boundaries` must not decrease, got {bounds}.")
    pieces = list(schedules)

    def schedule(count):
        c = jnp.asarray(count)
        out = _value(pieces[0], c)
        for boundary, piece in zip(bounds, pieces[1:], strict=True):
            out = jnp.where(c < boundary, out, _value(piece, c - boundary))
        return out

    return schedule


def _linear(start: Any, end: Any, pct: Any) -> Any:
    return (end - start) * pct + start


def _cosine(start: Any, end: Any, pct: Any) -> Any:
    return end + (start - end) / 2.0 * (jnp.cos(PI * pct) + 1.0)


@_factory.api
def piecewise_interpolate(
    interpolate_type: str, init_value: Scalar, boundaries_and_scales: Mapping[int, Scalar] | None = None
) -> _protocol.Schedule:
    r"""Multiply the value by a scale at each boundary, moving there linearly or along a cosine.

    With boundaries :math:`b_1 < b_2 < \dots` (:math:`b_0 = 0`) and the values
    :math:`v_0 = \eta_0`, :math:`v_i = v_{i-1} s_i`, for :math:`b_i \le c < b_{i+1}`:

    .. math::
        \eta(c) = v_i + (v_{i+1} - v_i)\, f \ \text{(linear)}, \quad
        v_{i+1} + \tfrac12 (v_i - v_{i+1})(1 + \cos \pi f) \ \text{(cosine)}, \quad
        f = \frac{c - b_i}{\max(b_{i+1} - b_i, 1)}

    and :math:`\eta(c) = v_n` after the last boundary: `optax.piecewise_interpolate_schedule`.
    The interpolation runs between the accumulated values, reaching :math:`v_{i+1}` at
    :math:`b_{i+1}`.

    Args:
      interpolate_type: "linear" or "cosine".
      init_value: :math:`\eta_0`, the value at count 0 (>= 0).
      boundaries_and_scales: `{step: scale}` (int steps >= 0, scales >= 0); none gives a
        constant schedule.

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a non-dict `boundaries_and_scales`, a non-int step or a non-number.
      ValueError: for an unknown `interpolate_type`, a negative scale or a non-finite number.

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.piecewise_interpolate("linear", 1.0, {4: 0.1, 8: 0.01})
        >>> print([round(float(lr(c)), 6) for c in (0, 2, 4, 6, 8, 10)])
        [1.0, 0.55, 0.1, 0.0505, 0.001, 0.001]
    """
    fn = "piecewise_interpolate"
    _checks.check_one_of(fn, "interpolate_type", interpolate_type, ("linear", "cosine"))
    number(fn, "init_value", init_value, _checks.check_nonnegative)
    if boundaries_and_scales is None:
        boundaries_and_scales = {}
    if not isinstance(boundaries_and_scales, Mapping):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `boundaries_and_scales` must be a dict {{step: scale}}, "
            f"got {boundaries_and_scales!r}."
        )
    for step, scale in boundaries_and_scales.items():
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            error = (
                ValueError if isinstance(step, numbers.Integral) and not isinstance(step, bool) else TypeError
            )
            raise error(
                f"`{_checks.api_name(fn)}`: the steps of `boundaries_and_scales` must be ints >= 0, "
                f"got {step!r}."
            )
        number(fn, f"boundaries_and_scales[{step}]", scale, _checks.check_nonnegative)
    steps = sorted(boundaries_and_scales)
    values = [f32(init_value)]
    for step in steps:
        values.append(values[-1] * f32(boundaries_and_scales[step]))
    bounds = [0, *(int(s) for s in steps)]
    interpolate = _linear if interpolate_type == "linear" else _cosine
    sizes = [np.float32(max(hi - lo, 1)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]

    def schedule(count):
        c = jnp.asarray(count)
        out = values[-1]
        for i in reversed(range(len(steps))):  # the first interval with c < its end wins
            piece = interpolate(values[i], values[i + 1], (f32(c) - bounds[i]) / sizes[i])
            out = jnp.where(c < bounds[i + 1], piece, out)
        return f32(out)

    return schedule
