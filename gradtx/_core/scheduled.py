"""Schedules checked at every step, against the range their argument's constant is checked against.

The check that meets a schedule at construction (`checks.check_hyperparam`, and every range check
through it) records the range, keyed by the schedule (`register`); `_hyper.resolve`, which every
transform calls a schedule through, checks each value (`check`). A value known where the step is
traced (an eager step, a schedule that ignores its count) raises, naming the factory, the argument,
the step and the value; a traced one is collected as an injected value is (`deferred.deferred`: the
outermost transform makes the step's updates NaN), or, inside a branch or a loop body whose values
cannot reach those updates, is itself NaN out of range.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from gradtx._core import deferred as _deferred


class _Range(NamedTuple):
    fn: str  # the factory the user called (`api_name`)
    name: str  # its argument, as the user gave the schedule
    low: float
    high: float
    low_open: bool
    high_open: bool
    allowed: str
    key: str  # the argument of the check (a building block's name for the same value: `ema`'s `decay`)


_RANGES: weakref.WeakKeyDictionary[Any, list[_Range]] = weakref.WeakKeyDictionary()
_RANGES_HELD: dict[int, tuple[Any, list[_Range]]] = {}  # schedules that take no weak reference (builtins)


def register(
    schedule: Any, fn: str, name: str, bounds: tuple[float, float, bool, bool], allowed: str
) -> None:
    """Record that `schedule`, given to `fn` as `name`, must give values within `bounds` (an `Interval`'s
    `low, high, low_open, high_open`), described as `allowed` ("in [0, 1)")."""
    low, high, low_open, high_open = bounds
    rule = _Range(fn, name, low, high, low_open, high_open, allowed, name)
    try:
        ranges = _RANGES.setdefault(schedule, [])
    except TypeError:
        ranges = _RANGES_HELD.setdefault(id(schedule), (schedule, []))[1]
    # a factory checks its argument, then its building blocks check it again under their names: the
    # message names the argument the user gave
    shown = next((r.name for r in ranges if r.fn == rule.fn), rule.name)
    rule = rule._replace(name=shown)
    if rule not in ranges:
        ranges.append(rule)


def _ranges(schedule: Any, name: str | None) -> list[_Range]:
    try:
        ranges = _RANGES.get(schedule, [])
    except TypeError:
        ranges = _RANGES_HELD.get(id(schedule), (None, []))[1]
    named = [r for r in ranges if name in (r.key, r.name)]
    return named or ranges


def check(schedule: Any, value: Any, count: Any, name: str | None = None) -> Any:
    """`value` (`schedule(count)`) checked against the ranges the schedule was given for (see above).

    Returns:
      `value`, or NaN in its place where a traced value is out of range.

    Raises:
      ValueError: for a value known at trace time that is out of range, naming the factory, the
        argument, the step (`count + 1`) and the value.
    """
    ranges = _ranges(schedule, name)
    if not ranges or jnp.ndim(value) != 0:
        return value
    if not _deferred.is_traced(value):
        v = float(value)
        for r in ranges:
            interval = _deferred.Interval(v, *r[2:6])  # low, high, low_open, high_open
            if not (math.isfinite(v) and interval.holds(v)):
                step = (
                    "at every step"
                    if count is None or _deferred.is_traced(count)
                    else f"at step {int(count) + 1}"
                )
                raise ValueError(
                    f"`{r.fn}`: the schedule given as `{r.name}` returned {np.asarray(value)} {step}; "
                    f"`{r.name}` must be {r.allowed}."
                )
        return value
    if _deferred._DEFERRED.get() is not None and _deferred._in_deferred_trace():
        for r in ranges:  # the outermost transform NaNs the step's updates
            _deferred._defer(_deferred.Interval(value, *r[2:6]))
        return value
    # inside a branch or a loop body, whose values cannot reach the outermost updates: NaN the value
    inside = jnp.isfinite(value)
    for r in ranges:
        inside = inside & _deferred.Interval(value, *r[2:6]).holds(value)
    if not jnp.issubdtype(jnp.result_type(value), jnp.inexact):
        return value  # an integer keeps its dtype
    return jnp.where(inside, value, jnp.nan)
