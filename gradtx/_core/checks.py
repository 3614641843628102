"""Construction-time argument checks: every public factory validates its arguments with these.

They all raise with one message form (see STYLE.md): which function, which argument, what
was given, what is allowed -- "`ftrl`: `learning_rate_power` must be <= 0, got 0.5." The
function named is the outermost public factory being called (`api_name`, set by
`gradtx._core.factory.api`), not the building block inside it that found the problem.
"""

from __future__ import annotations

import contextvars
import math
import numbers
from typing import Any, Callable, TypeGuard

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np

from gradtx._core import lowbit as _lowbit
from gradtx._core import scheduled as _scheduled
from gradtx._core.deferred import Interval as Interval
from gradtx._core.deferred import _defer as _defer
from gradtx._core.deferred import deferred as deferred
from gradtx._core.deferred import nan_unless as nan_unless

_API_NAME: contextvars.ContextVar[str | None] = contextvars.ContextVar("gradtx_api_name", default=None)


def api_name(fn: str) -> str:
    """The public function to name in an error: the outermost `@api` function being called, else `fn`."""
    return _API_NAME.get() or fn


def is_schedule(value: Any) -> TypeGuard[Callable[..., Any]]:
    """True for a callable hyperparameter (a schedule `count -> value`)."""
    return callable(value) and not isinstance(value, (jax.Array, np.ndarray))


def _is_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def _check_scalar_array(fn: str, name: str, value: Any) -> None:
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        if np.ndim(value) != 0:
            raise TypeError(
                f"`{api_name(fn)}`: `{name}` must be a scalar, got an array of shape {np.shape(value)}."
            )
        if not (jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer)):
            raise TypeError(f"`{api_name(fn)}`: `{name}` must be a real number, got dtype {value.dtype}.")


def _is_real(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(
        value, (numbers.Real, jax.Array, np.ndarray, np.generic)
    )


def check_hyperparam(
    fn: str, name: str, value: Any, *, interval: Interval | None = None, allowed: str = "finite"
) -> None:
    """`value` must be a finite real number, a scalar array, or a schedule; bools and strings are refused.

    A traced value inside `deferred()` is collected with `interval` (default: finite). A schedule's
    values are checked at each step against `interval` (`gradtx._core.scheduled`).

    Raises:
      TypeError: if `value` is none of those.
      ValueError: if it is a number that is not finite (NaN, inf, or too large for a float).
    """
    if is_schedule(value):
        _check_schedule_output(fn, name, value)
        _scheduled.register(value, api_name(fn), name, (interval or Interval(None))[1:], allowed)
        return
    if not _is_real(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a number, a scalar array or a schedule (count -> value), "
            f"got {value!r} of type {type(value).__name__}."
        )
    _check_scalar_array(fn, name, value)
    if _is_traced(value):
        _defer(interval or Interval(value))
        return
    _concrete(fn, name, value)


def _check_schedule_output(fn: str, name: str, schedule: Callable[..., Any]) -> None:
    """A schedule must give a real scalar: traced once on an abstract int32 count (no computation).

    A schedule that cannot be traced on its own (it needs more than the count, or fails) is
    left to fail where it is called; one whose output is not a real scalar is refused here,
    where a rate of shape (2,) would otherwise broadcast into per-element rates or fail
    deep inside a step.
    """
    try:
        out = jax.eval_shape(schedule, jax.ShapeDtypeStruct((), jnp.int32))
    except Exception:  # noqa: BLE001 -- not ours to judge here; the step reports it
        return
    leaves = jax.tree.leaves(out)
    if len(leaves) != 1 or leaves[0].shape != ():
        got = f"shape {leaves[0].shape}" if len(leaves) == 1 else f"{type(out).__name__} {out}"
        raise ValueError(
            f"`{api_name(fn)}`: the schedule given as `{name}` must return a scalar for a step count, "
            f"got {got}."
        )
    if not (jnp.issubdtype(leaves[0].dtype, jnp.floating) or jnp.issubdtype(leaves[0].dtype, jnp.integer)):
        raise TypeError(
            f"`{api_name(fn)}`: the schedule given as `{name}` must return a real number, "
            f"got dtype {leaves[0].dtype}."
        )


def schedule_at_zero(schedule: Callable[..., Any]) -> float | None:
    """The schedule's value at step 0 when it can be computed on its own, else None."""
    try:
        return float(schedule(jnp.zeros((), jnp.int32)))
    except Exception:  # noqa: BLE001 -- a schedule that needs a trace or more context
        return None


def check_number(fn: str, name: str, value: Any) -> None:
    """`value` must be a real number or scalar array, not a schedule (initial slot values, step counts, ...).

    Raises:
      TypeError: for a schedule or a non-number.
    """
    if is_schedule(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a number or a scalar array (not a schedule: it is "
            f"used once, not per step), got {value!r}."
        )
    if not _is_real(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a number or a scalar array, got {value!r} "
            f"of type {type(value).__name__}."
        )
    _check_scalar_array(fn, name, value)
    _concrete(fn, name, value)


def _concrete(fn: str, name: str, value: Any) -> float | None:
    """The value as a finite float when it is known at construction, else None (schedules, tracers).

    Raises:
      ValueError: for NaN, an infinity, or an integer too large for a float.
    """
    if is_schedule(value):
        return None
    if _is_traced(value):
        _defer(Interval(value))  # finite
        return None
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        shown = value if not isinstance(value, int) else f"an integer of {len(str(abs(value)))} digits"
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be finite, got {shown}.")
    return v


def _check(fn: str, name: str, interval: Interval, allowed: str) -> None:
    """`interval.value` must lie in the interval (a traced value: deferred, see `deferred`)."""
    value = interval.value
    check_hyperparam(fn, name, value, interval=interval, allowed=allowed)  # a traced value: deferred
    v = _concrete(fn, name, value)
    if v is not None and not interval.holds(v):
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be {allowed}, got {value!r}.")


def check_positive(fn: str, name: str, value: Any) -> None:
    """`value` must be > 0 (skipped for schedules; a traced value inside `deferred()` is collected)."""
    _check(fn, name, Interval(value, low=0.0), "> 0")


def check_nonnegative(fn: str, name: str, value: Any) -> None:
    """`value` must be >= 0 (skipped for schedules; a traced value inside `deferred()` is collected)."""
    _check(fn, name, Interval(value, low=0.0, low_open=False), ">= 0")


def check_nonpositive(fn: str, name: str, value: Any) -> None:
    """`value` must be <= 0 (skipped for schedules; a traced value inside `deferred()` is collected)."""
    _check(fn, name, Interval(value, high=0.0, high_open=False), "<= 0")


def check_finite(fn: str, name: str, value: Any) -> None:
    """`value` must be a finite number or a schedule (every check here refuses NaN and infinities)."""
    check_hyperparam(fn, name, value)


def check_learning_rate(fn: str, value: Any) -> None:
    """A learning rate must be finite and >= 0 (a negative rate is almost always a bug)."""
    check_nonnegative(fn, "learning_rate", value)


def check_in_range(
    fn: str,
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """`value` must lie in the interval from `low` to `high` (open ends as flagged)."""
    lb, rb = ("(" if low_open else "["), (")" if high_open else "]")
    _check(fn, name, Interval(value, low, high, low_open, high_open), f"in {lb}{low}, {high}{rb}")


def check_bool(fn: str, name: str, value: Any) -> None:
    """`value` must be a Python bool."""
    if not isinstance(value, bool):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be True or False, got {value!r} of type {type(value).__name__}."
        )


def check_float_dtype(fn: str, name: str, value: Any) -> None:
    """`value` must be None or a float or complex dtype (`jnp.bfloat16`, `"float16"`, `np.complex64`...).

    A slot of complex params may be kept complex (as optax allows); an integer slot would round
    every update away. A low-bit format (`gradtx._core.lowbit.Format`) stores a real slot in fewer bits."""
    if value is None or _lowbit.is_format(value):
        return
    try:
        dtype = jnp.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be None or a floating-point or complex dtype, got {value!r}."
        )


INT32_MAX = 2**31 - 1
"""The largest step count (`count` is int32): the default bound of `check_int`."""


def check_int(
    fn: str, name: str, value: Any, *, minimum: int | None = None, maximum: int = INT32_MAX
) -> None:
    """`value` must be a Python int (not a bool), at least `minimum` when given and at most `maximum`.

    The default `maximum` is the int32 step count's largest value: steps, intervals and sizes
    are compared with `count`, so a larger one could never be reached.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be an integer, got {value!r} of type {type(value).__name__}."
        )
    if minimum is not None and int(value) < minimum:
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be >= {minimum}, got {value!r}.")
    if int(value) > maximum:
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be <= {maximum}, got {value!r}.")


def check_one_of(fn: str, name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    """`value` must be one of `allowed`."""
    if value not in allowed:
        raise ValueError(
            f"`{api_name(fn)}`: `{name}` must be one of {', '.join(map(repr, allowed))}; got {value!r}."
        )


def check_transform(fn: str, name: str, value: Any) -> None:
    """`value` must be a gradient transformation (gradtx's or optax's: anything with init and update)."""
    if not (callable(getattr(value, "init", None)) and callable(getattr(value, "update", None))):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a gradient transformation (with `init` and `update`), "
            f"got {value!r} of type {type(value).__name__}."
        )


def check_callable(fn: str, name: str, value: Any) -> None:
    """`value` must be callable."""
    if not callable(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be callable, got {value!r} of type {type(value).__name__}."
        )


# --------------------------------------------------------------------------- interop
