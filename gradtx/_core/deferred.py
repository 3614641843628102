"""Checks on traced values, which cannot raise: their intervals are collected, and the step's updates NaN.

A factory called with traced values (`inject_hyperparams` builds its inner transform each step from
the state's values) cannot raise for them. Inside `deferred()`, each check of `gradtx._core.checks`
that meets a traced value records the interval the value must lie in -- the same interval as for a
concrete value -- and the caller makes the step's updates NaN unless every value lies in its
interval (`nan_unless`). Outside `deferred()` a traced value is not checked. The outermost transform
of every step opens one (`factory.wrapped_once`), for the schedules' values (`scheduled`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any, Iterator, NamedTuple

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np


def is_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


_DEFERRED: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("gradtx_deferred", default=None)
_TRACE: contextvars.ContextVar[Any] = contextvars.ContextVar("gradtx_deferred_trace", default=None)
_trace_state = getattr(jax.extend.core, "get_opaque_trace_state", None)


class Interval(NamedTuple):
    """A traced value's allowed interval (infinite ends open: the value must be finite)."""

    value: Any
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = True
    high_open: bool = True

    def holds(self, v: Any) -> Any:
        """Whether `v` lies in the interval (`&`, not `and`: `v` may be traced)."""
        return (v > self.low if self.low_open else v >= self.low) & (
            v < self.high if self.high_open else v <= self.high
        )


_FINITE = Interval(None)[1:]
"""The bounds of the plain finiteness check."""


@contextlib.contextmanager
def deferred() -> Iterator[list[Interval]]:
    """Collect, while active, the intervals the checks found traced values must lie in.

    Concrete values are checked as everywhere (they raise); only traced ones are collected.
    """
    intervals: list[Interval] = []
    token = _DEFERRED.set(intervals)
    trace = _TRACE.set(_trace_state() if _trace_state else None)
    try:
        yield intervals
    finally:
        _TRACE.reset(trace)
        _DEFERRED.reset(token)


def _in_deferred_trace() -> bool:
    """Whether values traced now belong to the trace `deferred()` was entered in (not a `lax.cond` branch,
    a loop body or an inner `jit` inside it, whose values cannot leave it)."""
    return _trace_state is not None and _trace_state() == _TRACE.get()


def _defer(interval: Interval) -> None:
    """Record `interval` for its traced scalar value inside `deferred()`; nothing outside it."""
    intervals = _DEFERRED.get()
    if intervals is not None and is_traced(interval.value) and jnp.ndim(interval.value) == 0:
        same = [k for k, i in enumerate(intervals) if i.value is interval.value]
        if interval[1:] == _FINITE and same:
            return  # every interval requires a finite value
        for k in same:
            if intervals[k][1:] in (_FINITE, interval[1:]):
                intervals[k] = interval
                return
        intervals.append(interval)


def nan_unless(intervals: list[Interval], updates: Any, combine: Any = None) -> Any:
    """`updates` with every float value NaN unless every interval holds its value.

    Row-sparse values and every other update object's float arrays included; ints (row
    indices), bools and `None` are kept. No intervals: `updates` as they are. The values are
    compared as one vector with their bounds (two comparisons and a reduction, however many
    checks), then each leaf is multiplied by 1 or NaN. `combine`, if given, maps the verdict
    (a bool scalar) before it is applied: `parallel.sharded_state` makes it every replica's.
    """
    if not intervals:
        return updates
    dtype = np.dtype(jnp.result_type(float, *(i.value for i in intervals)))
    values = jnp.stack([jnp.asarray(i.value, dtype) for i in intervals])
    low, high = (np.array([getattr(i, end) for i in intervals], dtype) for end in ("low", "high"))
    low_open, high_open = (
        np.array([getattr(i, end) for i in intervals]) for end in ("low_open", "high_open")
    )
    # (not `v > nextafter(low, -inf)` for a closed end: XLA on CPU flushes that denormal to 0)
    inside = jnp.where(low_open, values > low, values >= low) & jnp.where(
        high_open, values < high, values <= high
    )
    # 1 if every value is in its interval, else NaN: one reduction, then one multiply per leaf (exact: x * 1
    # is x, signed zeros and infinities included), which fuses into the leaf's own loop
    factor = jnp.prod(jnp.where(inside & jnp.isfinite(values), dtype.type(1), dtype.type(np.nan)))
    if combine is not None:
        factor = jnp.where(combine(~jnp.isnan(factor)), dtype.type(1), dtype.type(np.nan))

    def poison(x: Any) -> Any:
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return x
        return x * factor.astype(x.dtype)

    return jax.tree.map(poison, updates)
