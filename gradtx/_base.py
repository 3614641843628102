"""Above the protocol: the `api` decorator of factories, the argument checks, interop, `apply_updates`.

The protocol's names (`GradientTransformation`, `ElementWise`, `LeafWise`, the types and
errors) live in `gradtx._protocol` and are re-exported here, where the rest of the package
takes them from.

The construction-time argument checks all raise with one message form (see STYLE.md):
which function, which argument, what was given, what is allowed -- "`ftrl`:
`learning_rate_power` must be <= 0, got 0.5."
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import numbers
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import _vma, packing
from gradtx._protocol import (  # noqa: F401  (re-exported for the package)
    ElementWise,
    EmptyState,
    GradientTransformation,
    LeafWise,
    MissingExtraArgError,
    OptState,
    Params,
    ScalarOrSchedule,
    Schedule,
    SlotDict,
    TransformInitFn,
    TransformUpdateFn,
    TreeMismatchError,
    UnknownNameError,
    Updates,
    missing_extra_arg,
    missing_params,
    tree_mismatch_error,
)

# --------------------------------------------------------------------------- argument checks

_API_NAME: contextvars.ContextVar[str | None] = contextvars.ContextVar("gradtx_api_name", default=None)


def api(factory: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for public factories: argument errors name the function the user called.

    `momentum(learning_rate=0.1, momentum=-1.0)` builds `trace(...)` inside; with this
    decorator the error says "`momentum`: `momentum` must be ..." rather than naming the
    internal building block. A transform it returns accepts packed trees: unless it is
    `ElementWise` or `LeafWise` already, it is made leaf-wise (`packing.leaf_wise`). Its
    `init` types the state like the params under `shard_map(check_vma=True)`
    (`_vma.typed_like_params`).
    """
    name = factory.__name__

    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        token = _API_NAME.set(_API_NAME.get() or name)
        try:
            result = factory(*args, **kwargs)
        finally:
            _API_NAME.reset(token)
        if isinstance(result, GradientTransformation):
            result = packing.leaf_wise(result)
            if not _vma.is_typed(result.init):
                result = result._replace(init=_vma.typed_like_params(result.init))
        return result

    return wrapper


def api_name(fn: str) -> str:
    """The public function to name in an error: the outermost `@api` function being called, else `fn`."""
    return _API_NAME.get() or fn



def is_schedule(value: Any) -> bool:
    """True for a callable hyperparameter (a schedule `count -> value`)."""
    return callable(value) and not isinstance(value, (jax.Array, np.ndarray))


def _is_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def _check_scalar_array(fn: str, name: str, value: Any) -> None:
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        if np.ndim(value) != 0:
            raise TypeError(f"`{api_name(fn)}`: `{name}` must be a scalar, got an array of shape {np.shape(value)}.")
        if not (jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer)):
            raise TypeError(f"`{api_name(fn)}`: `{name}` must be a real number, got dtype {value.dtype}.")


def _is_real(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (numbers.Real, jax.Array, np.ndarray, np.generic))


def check_hyperparam(fn: str, name: str, value: Any) -> None:
    """`value` must be a real number, a scalar array, or a schedule; bools and strings are refused.

    Raises:
      TypeError: if `value` is none of those.
    """
    if is_schedule(value):
        return
    if not _is_real(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a number, a scalar array or a schedule (count -> value), "
            f"got {value!r} of type {type(value).__name__}."
        )
    _check_scalar_array(fn, name, value)


def check_number(fn: str, name: str, value: Any) -> None:
    """`value` must be a real number or scalar array, not a schedule (initial slot values, step counts, ...).

    Raises:
      TypeError: for a schedule or a non-number.
    """
    if is_schedule(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a number or a scalar array (not a schedule: it is used once, "
            f"not per step), got {value!r}."
        )
    if not _is_real(value):
        raise TypeError(
            f"`{api_name(fn)}`: `{name}` must be a number or a scalar array, got {value!r} of type {type(value).__name__}."
        )
    _check_scalar_array(fn, name, value)


def _concrete(value: Any) -> float | None:
    """The value as a float when it is known at construction, else None (schedules, tracers)."""
    if is_schedule(value) or _is_traced(value):
        return None
    return float(value)


def _check(fn: str, name: str, value: Any, ok: Callable[[float], bool], allowed: str) -> None:
    check_hyperparam(fn, name, value)
    v = _concrete(value)
    if v is not None and not ok(v):
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be {allowed}, got {value!r}.")


def check_positive(fn: str, name: str, value: Any) -> None:
    """`value` must be > 0 (skipped for schedules and traced values)."""
    _check(fn, name, value, lambda v: v > 0, "> 0")


def check_nonnegative(fn: str, name: str, value: Any) -> None:
    """`value` must be >= 0 (skipped for schedules and traced values)."""
    _check(fn, name, value, lambda v: v >= 0, ">= 0")


def check_nonpositive(fn: str, name: str, value: Any) -> None:
    """`value` must be <= 0 (skipped for schedules and traced values)."""
    _check(fn, name, value, lambda v: v <= 0, "<= 0")


def check_finite(fn: str, name: str, value: Any) -> None:
    """`value` must be a finite number (skipped for schedules and traced values)."""
    _check(fn, name, value, math.isfinite, "finite")


def check_learning_rate(fn: str, value: Any) -> None:
    """A learning rate must be finite and >= 0 (a negative rate is almost always a bug)."""
    check_finite(fn, "learning_rate", value)
    check_nonnegative(fn, "learning_rate", value)


def check_in_range(
    fn: str, name: str, value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> None:
    """`value` must lie in the interval from `low` to `high` (open ends as flagged)."""
    lb, rb = ("(" if low_open else "["), (")" if high_open else "]")

    def ok(v: float) -> bool:
        return (v > low if low_open else v >= low) and (v < high if high_open else v <= high)

    _check(fn, name, value, ok, f"in {lb}{low}, {high}{rb}")


def check_bool(fn: str, name: str, value: Any) -> None:
    """`value` must be a Python bool."""
    if not isinstance(value, bool):
        raise TypeError(f"`{api_name(fn)}`: `{name}` must be True or False, got {value!r} of type {type(value).__name__}.")


def check_float_dtype(fn: str, name: str, value: Any) -> None:
    """`value` must be None or a floating-point dtype (`jnp.bfloat16`, `"float16"`, `np.float32`...)."""
    if value is None:
        return
    try:
        dtype = jnp.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"`{api_name(fn)}`: `{name}` must be None or a floating-point dtype, got {value!r}.")


def check_int(fn: str, name: str, value: Any, *, minimum: int | None = None) -> None:
    """`value` must be a Python int (not a bool), at least `minimum` when given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{api_name(fn)}`: `{name}` must be an integer, got {value!r} of type {type(value).__name__}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be >= {minimum}, got {value!r}.")


def check_one_of(fn: str, name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    """`value` must be one of `allowed`."""
    if value not in allowed:
        raise ValueError(f"`{api_name(fn)}`: `{name}` must be one of {', '.join(map(repr, allowed))}; got {value!r}.")


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
        raise TypeError(f"`{api_name(fn)}`: `{name}` must be callable, got {value!r} of type {type(value).__name__}.")


# --------------------------------------------------------------------------- interop


def _accepts_extra_args(update: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(update)
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def _dropping_extra_args(update: Callable[..., Any]) -> Callable[..., Any]:
    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        return update(updates, state, params)

    return update_fn


def with_extra_args_support(tx: Any) -> GradientTransformation:
    """`tx` as a gradtx transform: its `update` accepts (and, if `tx` cannot take them, drops) extra args,
    and it accepts packed trees.

    gradtx's own transforms pass through unchanged. A foreign transform (e.g. an optax one
    whose `update` has no `**extra_args`), or one built by hand as a plain
    `GradientTransformation`, is wrapped so that a chain can feed extra arguments to its
    other members, and made leaf-wise (`gradtx.packing.leaf_wise`): on packed parameters it
    sees per-leaf views, as a transform of unknown kind must. Wrap it in `gradtx.ElementWise`
    first to declare that it treats elements alike.

    Args:
      tx: a transform (gradtx, optax or anything with `init` and `update`).

    Returns:
      An `ElementWise` or `LeafWise` transform whose `update` takes `**extra_args`.

    Raises:
      TypeError: if `tx` has no `init` and `update`.

    Example:
        >>> import jax.numpy as jnp, optax, gradtx
        >>> tx = gradtx.with_extra_args_support(optax.sgd(0.1))
        >>> u, _ = tx.update(jnp.ones(2), tx.init(jnp.zeros(2)), global_step=3)  # dropped for optax
        >>> u
        Array([-0.1, -0.1], dtype=float32)
    """
    check_transform("with_extra_args_support", "tx", tx)
    update = tx.update if _accepts_extra_args(tx.update) else _dropping_extra_args(tx.update)
    if isinstance(tx, (ElementWise, LeafWise)):
        return tx if update is tx.update else type(tx)(tx.init, update)
    return packing.leaf_wise(GradientTransformation(tx.init, update))


def composite(init_fn: Callable[..., Any], update_fn: Callable[..., Any], *members: Any) -> GradientTransformation:
    """A transform that runs `members` on the trees it is given (a chain, a wrapper), of their kind.

    `ElementWise` when every member is (its own rule must then treat elements alike too:
    routing, sums, element-wise arithmetic); `LeafWise` otherwise -- it passes packed trees
    on, and its leaf-wise members unpack them (`with_extra_args_support` made them so).
    """
    kind = ElementWise if all(isinstance(m, ElementWise) for m in members) else LeafWise
    return kind(init_fn, update_fn)


# --------------------------------------------------------------------------- applying updates


def apply_updates(params: Params, updates: Updates) -> Params:
    """`params + updates`, leaf by leaf, each result cast back to its param's dtype.

    A row-sparse update (`gradtx.sparse.RowSparse`) is scattered into its rows only. A
    `None` update leaves its param unchanged (a variable without a gradient); `None`
    params stay `None`.

    Args:
      params: the current parameters.
      updates: updates with the structure of `params` (the output of a transform's `update`).

    Returns:
      The new parameters, with the dtypes of `params`.

    Raises:
      TreeMismatchError: if `updates` and `params` differ in structure.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.apply_updates({"w": jnp.ones(2, jnp.bfloat16)}, {"w": jnp.array([0.5, -0.5])})["w"]
        Array([1.5, 0.5], dtype=bfloat16)
    """
    from gradtx import _tree  # local: _tree imports this module

    def add(p, u):
        if p is None or u is None:
            return p
        p = jnp.asarray(p)
        if _tree.is_row_sparse(u):
            return u.scatter_add_into(p)
        return jnp.asarray(p + u).astype(p.dtype)

    return _tree.map_updates("apply_updates", add, params, updates, names=("params", "updates"))
