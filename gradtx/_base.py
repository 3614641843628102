"""The protocol: `GradientTransformation`, `EmptyState`, `apply_updates`, types, errors.

Everything else in gradtx is built from the names here. The protocol is structurally
identical to optax's, so transforms move freely between the two libraries.

This module also holds the construction-time argument checks. They all raise with one
message form (see STYLE.md): which function, which argument, what was given, what is
allowed -- "`ftrl`: `learning_rate_power` must be <= 0, got 0.5."
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import numbers
from typing import Any, Callable, NamedTuple, Protocol, Union

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import _vma

# --------------------------------------------------------------------------- types

Params = Any
"""A pytree of arrays: the variables being trained."""
Updates = Any
"""A pytree with the structure of `Params`: gradients on the way in, updates on the way out."""
OptState = Any
"""A pytree of arrays: the state of a transform (NamedTuples, tuples, dicts)."""
SlotDict = dict
"""`{slot name: Updates}`: named per-parameter slots held in one field (e.g. `per_leaf`'s)."""
Schedule = Callable[[jax.Array], Any]
"""A function of the int32 step `count` returning a scalar (TF's callable hyperparameter)."""
ScalarOrSchedule = Union[float, int, jax.Array, Schedule]
"""A hyperparameter: a Python number, a jax scalar, or a `Schedule`."""


class TransformInitFn(Protocol):
    def __call__(self, params: Params) -> OptState: ...


class TransformUpdateFn(Protocol):
    def __call__(
        self, updates: Updates, state: OptState, params: Params | None = None, **extra_args: Any
    ) -> tuple[Updates, OptState]: ...


class GradientTransformation(NamedTuple):
    """A pure optimizer: `init(params) -> state`, `update(updates, state, params, **extra_args)`.

    `update` returns `(new_updates, new_state)`; the new updates are *added* to the params
    with `apply_updates`. Every gradtx `update` accepts and ignores unknown keyword
    arguments, so one call can feed extra arguments (`global_step`, `replica_ok`, ...) to
    whichever transform of a chain needs them.

    The class is structurally identical to `optax.GradientTransformation`: a gradtx
    transform can be used wherever optax expects one, and `gradtx.chain` accepts optax's.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sgd(learning_rate=0.1)
        >>> params = {"w": jnp.array([1.0, 2.0])}
        >>> state = tx.init(params)
        >>> updates, state = tx.update({"w": jnp.array([1.0, 1.0])}, state, params)
        >>> gradtx.apply_updates(params, updates)["w"]
        Array([0.9, 1.9], dtype=float32)
    """

    init: TransformInitFn
    update: TransformUpdateFn


class EmptyState(NamedTuple):
    """The state of a transform that keeps none."""


# --------------------------------------------------------------------------- errors


class MissingExtraArgError(TypeError):
    """An `update` needs an extra keyword argument the caller did not pass."""


class TreeMismatchError(ValueError):
    """Two pytrees that must have the same structure do not."""


class UnknownNameError(KeyError, ValueError):
    """A name that the registry does not know (catchable as KeyError or ValueError)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def missing_extra_arg(fn: str, arg: str, example: str) -> MissingExtraArgError:
    """The error for a transform whose `update` was called without a needed extra argument."""
    return MissingExtraArgError(
        f"`{fn}`: `update` needs the extra argument `{arg}`; call it as "
        f"`tx.update(grads, state, params, {arg}={example})`."
    )


def missing_params(fn: str) -> ValueError:
    """The error for a transform whose rule needs the current params, called with `params=None`."""
    return ValueError(
        f"`{fn}`: `update` needs the current parameters (its rule reads them); call it as "
        f"`tx.update(grads, state, params)`."
    )


def _describe_tree(tree: Any, limit: int = 12) -> str:
    paths = [jax.tree_util.keystr(p) or "<root>" for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    if not paths:
        return "no leaves"
    shown = ", ".join(paths[:limit])
    more = f", ... ({len(paths) - limit} more)" if len(paths) > limit else ""
    return f"leaves at {shown}{more}"


def tree_mismatch_error(fn: str, name_a: str, a: Any, name_b: str, b: Any) -> TreeMismatchError:
    """The one error for two pytrees whose structures differ: key paths of both, and the first difference.

    Args:
      fn: the public name of the function that found the mismatch.
      name_a: what `a` is (e.g. ``"updates"``).
      a: the first tree.
      name_b: what `b` is (e.g. ``"state.m"``).
      b: the second tree.

    Returns:
      A `TreeMismatchError` to raise.
    """
    pa = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(a)[0]}
    pb = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(b)[0]}
    only_a, only_b = sorted(pa - pb), sorted(pb - pa)
    detail = []
    if only_a:
        detail.append(f"only in {name_a}: {', '.join(k or '<root>' for k in only_a[:8])}")
    if only_b:
        detail.append(f"only in {name_b}: {', '.join(k or '<root>' for k in only_b[:8])}")
    if not detail:
        detail.append(
            f"same key paths, different node types: {jax.tree.structure(a)} vs {jax.tree.structure(b)}"
        )
    return TreeMismatchError(
        f"`{fn}`: {name_a} and {name_b} must have the same tree structure; "
        f"{'; '.join(detail)}.\n  {name_a}: {_describe_tree(a)}\n  {name_b}: {_describe_tree(b)}"
    )


# --------------------------------------------------------------------------- argument checks

_API_NAME: contextvars.ContextVar[str | None] = contextvars.ContextVar("gradtx_api_name", default=None)


def api(factory: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for public factories: argument errors name the function the user called.

    `momentum(learning_rate=0.1, momentum=-1.0)` builds `trace(...)` inside; with this
    decorator the error says "`momentum`: `momentum` must be ..." rather than naming the
    internal building block. The `init` of a transform it returns types the state like
    the params under `shard_map(check_vma=True)` (`_vma.typed_like_params`).
    """
    name = factory.__name__

    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        token = _API_NAME.set(_API_NAME.get() or name)
        try:
            result = factory(*args, **kwargs)
        finally:
            _API_NAME.reset(token)
        if isinstance(result, GradientTransformation) and not _vma.is_typed(result.init):
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


def with_extra_args_support(tx: Any) -> GradientTransformation:
    """`tx` as a gradtx transform whose `update` accepts (and, if it cannot take them, drops) extra args.

    gradtx's own transforms pass through unchanged; a foreign transform (e.g. a plain
    optax one whose `update` has no `**extra_args`) is wrapped so that a chain can feed
    extra arguments to its other members.

    Args:
      tx: a transform (gradtx, optax or anything with `init` and `update`).

    Returns:
      A `GradientTransformation` whose `update` takes `**extra_args`.

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
    if isinstance(tx, GradientTransformation) or _accepts_extra_args(tx.update):
        return GradientTransformation(tx.init, tx.update)

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        return tx.update(updates, state, params)

    return GradientTransformation(tx.init, update_fn)


# --------------------------------------------------------------------------- traits (for gradtx.fused)


def packable(tx: GradientTransformation, *, reads_params: bool) -> GradientTransformation:
    """Mark `tx` as safe to run on packed leaves (`gradtx.fused`): it treats every element
    alike, element by element or through reductions over all of them (a global norm), and
    never by leaf shape, key path or leaf identity. `reads_params` says whether its rule
    reads the parameters. Returns `tx` (its `update` function carries the marks)."""
    tx.update._gradtx_packable = True
    tx.update._gradtx_reads_params = reads_params
    return tx


def is_packable(tx: Any) -> bool:
    """Whether `tx` was marked with `packable` (foreign transforms are not)."""
    return bool(getattr(getattr(tx, "update", None), "_gradtx_packable", False))


def reads_params(tx: Any) -> bool:
    """Whether a packable `tx` reads the params (True when unknown)."""
    return bool(getattr(getattr(tx, "update", None), "_gradtx_reads_params", True))


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
