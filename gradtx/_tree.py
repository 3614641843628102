"""Shared helpers: the one home of any formula or tree walk needed in more than one place.

Hyperparameter resolution, mapping over update trees (with `None` and row-sparse leaves),
slot initialisation from shapes alone, the step counter, and key-path matching.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gradtx import _checks, _protocol, _scalars, _sliced

# --------------------------------------------------------------------------- hyperparameters


def resolve(value: _protocol.ScalarOrSchedule, count: jax.Array) -> Any:
    """The value of a hyperparameter at step `count`: schedules are called, scalars returned as is.

    Inside step t a schedule sees `count = t - 1`, which is TF's `global_step` before its
    increment.
    """
    return value(count) if _checks.is_schedule(value) else value


def any_schedule(*values: Any) -> bool:
    """True when any of the hyperparameters is a schedule (so its transform needs a `count`)."""
    return any(_checks.is_schedule(v) for v in values)


def scalar(value: Any, tree: Any = None) -> jax.Array:
    """A hyperparameter as a float scalar of the variables' dtype: float64 when `tree` holds a float64 leaf,
    else float32 (TF keeps its scalars in the variables' dtype, with or without x64).

    For the scalar arithmetic a combinator does once per step, before `like` casts it to each
    leaf's dtype (building blocks leave this to `gradtx.update_rule`).
    """
    leaves = jax.tree.leaves(tree, is_leaf=is_row_sparse)
    wide = any(getattr(values_of(x), "dtype", None) == jnp.float64 for x in leaves)
    return jnp.asarray(value, jax.dtypes.canonicalize_dtype(jnp.float64) if wide else jnp.float32)


def like(value: Any, x: jax.Array) -> Any:
    """A resolved scalar hyperparameter for array `x`, by `gradtx.update_rule`'s dtype policy (`_scalars`): a
    Python number as it is (it takes `x`'s dtype where it meets it), an array cast to `x`'s dtype (so bf16
    leaves stay bf16)."""
    return _scalars.cast(value, x.dtype)


# --------------------------------------------------------------------------- moments
# TF's kernels write an exponential moving average in two forms that round differently;
# each optimizer uses the one its kernel uses.


def moment_increment(m: jax.Array, x: jax.Array, decay: jax.Array) -> jax.Array:
    """`m += (x - m) * (1 - decay)`: the form of ApplyAdam, ApplyRMSProp, ApplyAdaMax."""
    keep = 1 - decay
    if m.dtype == x.dtype == getattr(keep, "dtype", None):  # the same ops, traced without jnp's wrappers
        return lax.add(m, lax.mul(lax.sub(x, m), keep))
    return m + (x - m) * keep


def moment_blend(m: jax.Array, x: jax.Array, decay: jax.Array) -> jax.Array:
    """`m * decay + x * (1 - decay)`: the form of ApplyAdadelta, AddSign/PowerSign and sparse Adam."""
    return m * decay + x * (1 - decay)


# --------------------------------------------------------------------------- thresholds


def soft_threshold(x: jax.Array, threshold: jax.Array) -> jax.Array:
    """`sign(x) * max(|x| - threshold, 0)`: the L1 proximal step (FOBOS, AdagradDA's closed form)."""
    return jnp.sign(x) * jnp.maximum(jnp.abs(x) - threshold, 0.0)


def by_l1(l1: jax.Array, shrunk: jax.Array, plain: jax.Array) -> jax.Array:
    """TF's choice between the L1-shrunk and the plain proximal step: `shrunk` where `l1 > 0`, `plain` where
    `l1 == 0`, and NaN for a NaN or negative `l1` (a schedule's value: TF would step as if it were 0)."""
    return jnp.where(l1 > 0, shrunk, jnp.where(l1 == 0, plain, jnp.nan))


# --------------------------------------------------------------------------- norms
# TF measures a row-sparse gradient (IndexedSlices) by its values as they are, duplicates
# included; low-precision leaves are summed in float32.


def values_of(x: Any) -> jax.Array:
    """The array a norm is taken over: a row-sparse gradient's values, or the array itself."""
    return x.values if is_row_sparse(x) else x


def with_values(x: Any, values: jax.Array) -> Any:
    """`x` with `values` in place of `values_of(x)`: a row-sparse gradient keeps its indices."""
    return x.with_values(values) if is_row_sparse(x) else values


def rows_of(x: Any, table: jax.Array) -> jax.Array:
    """`table` as the entries of `x` see it: the rows a row-sparse `x` touches, or the whole table."""
    return x.gather(table) if is_row_sparse(x) else table


def _wide(x: jax.Array) -> jax.Array:
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def abs_sq(x: jax.Array) -> jax.Array:
    """`|x|**2` element by element: `x * x` for real `x`, `re**2 + im**2` (real) for complex `x`.

    The second moments of the adaptive rules are of `|g|**2`, as in optax; squaring a complex
    `g` itself would rotate the step.
    """
    if jnp.iscomplexobj(x):
        return jnp.real(x) ** 2 + jnp.imag(x) ** 2
    return x * x


def real_dtype(dtype: Any) -> Any:
    """float32 for complex64 (float64 for complex128); a real dtype is itself."""
    return jnp.finfo(dtype).dtype


def squared_norm(x: Any, axis: Any = None, keepdims: bool = False) -> jax.Array:
    """`sum(|x|**2)` of one leaf (over `axis`), real, in at least float32."""
    v = _wide(values_of(x))
    return jnp.sum(abs_sq(v), axis=axis, keepdims=keepdims)


def clip_to_norm(x: jax.Array, c: jax.Array, axis: Any = None) -> jax.Array:
    """`tf.clip_by_norm(x, c, axes)`: `x * c / max(||x||, c)`, the L2 norm taken over `axis`.

    The square root is taken only where the sum is positive (a finite gradient at 0).
    """
    l2sum = squared_norm(x, axis=axis, keepdims=True).astype(real_dtype(x.dtype))
    l2sum = l2sum if axis is not None else _sliced.total(l2sum)  # the whole leaf's on ZeRO's slices too
    norm = jnp.where(l2sum > 0, jnp.sqrt(jnp.where(l2sum > 0, l2sum, 1)), l2sum)
    return (x * c) / jnp.maximum(norm, c)


def global_norm(tree: Any) -> jax.Array:
    """TF's `tf.linalg.global_norm`: `sqrt(2 * sum(l2_loss(t)))`, `l2_loss(t) = sum(t**2) / 2`.

    `None` leaves are skipped; an empty tree has norm 0.
    """
    leaves = [x for x in jax.tree.leaves(tree, is_leaf=is_row_sparse) if x is not None]
    if not leaves:
        return jnp.zeros([], jnp.float32)
    halves = jnp.stack([squared_norm(x) / 2 for x in leaves])
    return jnp.sqrt(_sliced.total(jnp.sum(halves)) * 2)  # exact on ZeRO's slices too (`_sliced`)


# --------------------------------------------------------------------------- step counter


def zero_count() -> jax.Array:
    """The initial `count`: no update completed yet."""
    return jnp.zeros([], jnp.int32)


def increment(count: jax.Array) -> jax.Array:
    """`count + 1`, saturating at its integer type's maximum instead of wrapping to negative.

    An int32 or int64 array keeps its dtype (a TF1 global step may be int64); anything else
    becomes int32.
    """
    dtype = count.dtype if hasattr(count, "dtype") and jnp.issubdtype(count.dtype, jnp.integer) else jnp.int32
    count = jnp.asarray(count, dtype)
    top = np.asarray(jnp.iinfo(dtype).max, dtype)  # typed (uint32's, uint64's maxima overflow a weak int);
    # a NumPy constant, not a device array: a committed one would commit the new count and miss jit's cache
    return count + (count < top).astype(dtype)  # no nested jit (jnp.where) per count


# --------------------------------------------------------------------------- tree walks


def is_row_sparse(x: Any) -> bool:
    """True for a `gradtx.sparse.RowSparse` gradient (a leaf for every update rule)."""
    return getattr(type(x), "_gradtx_row_sparse", False)


def is_update_object(x: Any) -> bool:
    """True for an update leaf that is not an array (a `RowSparse`, AGN's pull): `apply_updates` calls its
    `applied_to(param)`."""
    return getattr(type(x), "_gradtx_update_leaf", False)


def _is_update_leaf(x: Any) -> bool:
    return x is None or is_update_object(x)


def flatten_updates(
    fn_name: str, tree: Any, *rest: Any, names: tuple[str, ...] | None = None
) -> tuple[list[Any], list[list[Any]], Any]:
    """Flatten `tree` (row-sparse and `None` entries are leaves) and each of `rest` up to it.

    Returns `(leaves, rest_leaves, treedef)`. A structure mismatch raises the key-path
    error of `_protocol.tree_mismatch_error`, naming `fn_name` and, from `names`, the trees.
    """
    treedef: Any  # a PyTreeDef (jax's annotations leave its type unresolved)
    leaves, treedef = jax.tree.flatten(tree, is_leaf=_is_update_leaf)
    labels = names or ("updates",) + tuple(f"tree {i + 1}" for i in range(len(rest)))
    flat_rest = []
    for label, other in zip(labels[1:], rest, strict=True):
        try:
            flat_rest.append(treedef.flatten_up_to(other))
        except (ValueError, TypeError):
            raise _protocol.tree_mismatch_error(fn_name, labels[0], tree, label, other) from None
    return leaves, flat_rest, treedef


def is_integer(x: Any) -> bool:
    """True for an integer or boolean array (or row-sparse values): no update moves it by a fraction."""
    dtype = getattr(values_of(x), "dtype", None)
    return dtype is not None and (jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.bool_))


def map_updates(
    fn_name: str,
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    names: tuple[str, ...] | None = None,
) -> Any:
    """`jax.tree.map(f, tree, *rest)` over update trees, with the rules every transform needs.

    Row-sparse gradients are single leaves; where `tree` has `None`, the result has `None`
    and `f` is not called. A structure mismatch raises the key-path error of
    `_protocol.tree_mismatch_error`, naming `fn_name`.

    Args:
      fn_name: the public name reported in errors.
      f: the per-leaf function.
      tree: the tree whose structure the result has (usually the updates).
      *rest: trees with the same structure (state slots, params).
      names: what each tree is, for the error message.
    """
    leaves, flat_rest, treedef = flatten_updates(fn_name, tree, *rest, names=names)
    out = [None if x is None else f(x, *xs) for x, *xs in zip(leaves, *flat_rest, strict=True)]
    return treedef.unflatten(out)


def split_map(
    fn_name: str,
    f: Callable[..., tuple[Any, ...]],
    n: int,
    tree: Any,
    *rest: Any,
    names: tuple[str, ...] | None = None,
) -> tuple[Any, ...]:
    """Map `f` (returning an `n`-tuple per leaf) over trees and return `n` trees.

    The per-leaf math of a building block returns `(update, new_slot_1, ...)`, its slots
    passed as the first `n - 1` trees of `rest`; this turns those tuples into `n` trees
    with the structure of `tree`. Where the gradient is `None` (a variable without a
    gradient, or one masked out), the update is `None` and the slots are returned
    unchanged, as TF leaves the slots of a variable that got no gradient.
    """
    leaves, flat_rest, treedef = flatten_updates(fn_name, tree, *rest, names=names)
    out = [
        (None, *xs[: n - 1]) if x is None else f(x, *xs) for x, *xs in zip(leaves, *flat_rest, strict=True)
    ]
    return tuple(treedef.unflatten([o[i] for o in out]) for i in range(n))


def map_leaves(f: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """`jax.tree.map` whose leaves include `None` and row-sparse entries; unlike `map_updates`,
    `f` is called on `None` leaves too and decides what they give."""
    return jax.tree.map(f, tree, *rest, is_leaf=_is_update_leaf)


def split_leaves(f: Callable[..., tuple[Any, ...]], n: int, tree: Any, *rest: Any) -> tuple[Any, ...]:
    """`map_leaves` with `f` returning an `n`-tuple per leaf; returns `n` trees."""
    treedef: Any  # a PyTreeDef (jax's annotations leave its type unresolved)
    leaves, treedef = jax.tree.flatten(tree, is_leaf=_is_update_leaf)
    flat_rest = [treedef.flatten_up_to(r) for r in rest]
    outs = [f(x, *xs) for x, *xs in zip(leaves, *flat_rest, strict=True)]
    return tuple(treedef.unflatten([o[i] for o in outs]) for i in range(n))


def where(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """`on_true` where the scalar `pred` holds, else `on_false`, leaf by leaf (None stays None).

    Row-sparse leaves select their values (both sides must share the indices).
    """

    def pick(a, b):
        if a is None:
            return None
        if is_row_sparse(a):
            return a.with_values(jnp.where(pred, a.values, b.values))
        return jnp.where(pred, a, b)

    return map_leaves(pick, on_true, on_false)


def all_finite(tree: Any) -> jax.Array:
    """Whether every value of `tree` (row-sparse values included) is finite: a bool scalar."""
    ok = jnp.asarray(True)
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf))
    return _sliced.total(ok, "all")


# --------------------------------------------------------------------------- key paths


def key_paths(tree: Any) -> list[str]:
    """The key path (`jax.tree_util.keystr`) of each leaf of an update tree, in flattening order."""
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_update_leaf)[0]
    return [jax.tree_util.keystr(path) or "<root>" for path, _ in flat]
