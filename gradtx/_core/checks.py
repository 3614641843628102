"""Construction-time argument checks: every public factory validates its arguments with these.

They all raise with one message form (see STYLE.md): which function, which argument, what
was given, what is allowed -- "`ftrl`: `learning_rate_power` must be <= 0, got 0.5." The
function named is the outermost public factory being called (`api_name`, set by
`gradtx._core.factory.api`), not the building block inside it that found the problem.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import numbers
from typing import Any, Callable, Iterator, TypeGuard

import jax
import jax.numpy as jnp
import numpy as np

_API_NAME: contextvars.ContextVar[str | None] = contextvars.ContextVar("gradtx_api_name", default=None)


def api_name(fn: str) -> str:
    """The public function to name in an error: the outermost `@api` function being called, else `fn`."""
    return _API_NAME.get() or fn


def is_schedule(value: Any) -> TypeGuard[Callable[..., Any]]:
    """True for a callable hyperparameter (a schedule `count -> value`)."""
    return callable(value) and not isinstance(value, (jax.Array, np.ndarray))


def _is_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


# --------------------------------------------------------------------------- traced values
# A factory called with traced values (`inject_hyperparams` builds its inner transform each
# step from the state's values) cannot raise for them. Inside `deferred()`, each check below
# that meets a traced value records its condition -- the same `ok` as for a concrete value --
# as a traced bool instead, and the caller makes the step's updates NaN where one fails
# (`nan_unless`). Outside `deferred()` a traced value is not checked, as before.
_DEFERRED: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("gradtx_deferred", default=None)


@contextlib.contextmanager
def deferred() -> Iterator[list[Any]]:
    """Collect, while active, the conditions the checks found on traced values (traced bool scalars).

    Concrete values are checked as everywhere (they raise); only traced ones are collected.
    """
    conditions: list[Any] = []
    token = _DEFERRED.set(conditions)
    try:
        yield conditions
    finally:
        _DEFERRED.reset(token)


def _defer(value: Any, ok: Callable[[Any], Any]) -> None:
    """Record `ok(value)` for a traced `value` inside `deferred()`; nothing outside it."""
    conditions = _DEFERRED.get()
    if conditions is not None and _is_traced(value) and jnp.ndim(value) == 0:
        conditions.append(jnp.asarray(ok(value), bool))


def nan_unless(conditions: list[Any], updates: Any) -> Any:
    """`updates` with every float value NaN unless all `conditions` hold (one scalar select per leaf).

    Row-sparse values and every other update object's float arrays included; ints (row
    indices), bools and `None` are kept. No conditions: `updates` as they are.
    """
    if not conditions:
        return updates
    ok = functools.reduce(jnp.logical_and, conditions)

    def poison(x: Any) -> Any:
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return x
        return jnp.where(ok, x, jnp.asarray(jnp.nan, x.dtype))

    return jax.tree.map(poison, updates)


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


def check_hyperparam(fn: str, name: str, value: Any) -> None:
    """`value` must be a finite real number, a scalar array, or a schedule; bools and strings are refused.

    Raises:
      TypeError: if `value` is none of those.
      ValueError: if it is a number that is not finite (NaN, inf, or too large for a float).
    """
    if is_schedule(value):
        _check_schedule_output(fn, name, value)
        return
    if not _is_real(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a number, a scalar array or a schedule (count -> value), "
            f"got {value!r} of type {type(value).__name__}."
        )
    _check_scalar_array(fn, name, value)
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
        _defer(value, jnp.isfinite)
        return None
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        shown = value if not isinstance(value, int) else f"an integer of {len(str(abs(value)))} digits"
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be finite, got {shown}.")
    return v


def _check(fn: str, name: str, value: Any, ok: Callable[[Any], Any], allowed: str) -> None:
    check_hyperparam(fn, name, value)  # finite (a traced value: deferred, see `deferred`)
    if _is_traced(value):
        _defer(value, ok)
        return
    v = _concrete(fn, name, value)
    if v is not None and not ok(v):
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be {allowed}, got {value!r}.")


def check_positive(fn: str, name: str, value: Any) -> None:
    """`value` must be > 0 (skipped for schedules; a traced value inside `deferred()` is collected)."""
    _check(fn, name, value, lambda v: v > 0, "> 0")


def check_nonnegative(fn: str, name: str, value: Any) -> None:
    """`value` must be >= 0 (skipped for schedules; a traced value inside `deferred()` is collected)."""
    _check(fn, name, value, lambda v: v >= 0, ">= 0")


def check_nonpositive(fn: str, name: str, value: Any) -> None:
    """`value` must be <= 0 (skipped for schedules; a traced value inside `deferred()` is collected)."""
    _check(fn, name, value, lambda v: v <= 0, "<= 0")


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

    def ok(v: Any) -> Any:  # `&`, not `and`: `v` may be traced (see `deferred`)
        return (v > low if low_open else v >= low) & (v < high if high_open else v <= high)

    _check(fn, name, value, ok, f"in {lb}{low}, {high}{rb}")


def check_bool(fn: str, name: str, value: Any) -> None:
    """`value` must be a Python bool."""
    if not isinstance(value, bool):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be True or False, got {value!r} of type {type(value).__name__}."
        )


def check_float_dtype(fn: str, name: str, value: Any) -> None:
    """`value` must be None or a float or complex dtype (`jnp.bfloat16`, `"float16"`, `np.complex64`...).

    A slot of complex params may be kept complex (as optax allows); an integer slot would round
    every update away."""
    if value is None:
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
