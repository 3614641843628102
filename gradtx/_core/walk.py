"""Walking update trees: `None` and row-sparse leaves, structure errors naming key paths.

Every transform maps its formula over the updates with these: a row-sparse gradient is one
leaf, a `None` update (a variable without a gradient) gives `None` and keeps its slots.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from gradtx._core import protocol as _protocol
from gradtx._core import sliced as _sliced


def values_of(x: Any) -> jax.Array:
    """The array a norm is taken over: a row-sparse gradient's values, or the array itself."""
    return x.values if is_row_sparse(x) else x


def with_values(x: Any, values: jax.Array) -> Any:
    """`x` with `values` in place of `values_of(x)`: a row-sparse gradient keeps its indices."""
    return x.with_values(values) if is_row_sparse(x) else values


def rows_of(x: Any, table: jax.Array) -> jax.Array:
    """`table` as the entries of `x` see it: the rows a row-sparse `x` touches, or the whole table."""
    return x.gather(table) if is_row_sparse(x) else table


def is_row_sparse(x: Any) -> bool:
    """True for a `gradtx.sparse.RowSparse` gradient (a leaf for every update rule)."""
    return getattr(type(x), "_gradtx_row_sparse", False)


def is_update_object(x: Any) -> bool:
    """True for an update leaf that is not an array (a `RowSparse`, AGN's pull): `apply_updates` calls its
    `applied_to(param)`."""
    return getattr(type(x), "_gradtx_update_leaf", False)


def is_update_leaf(x: Any) -> bool:
    return x is None or is_update_object(x)


def flatten_updates(
    fn_name: str, tree: Any, *rest: Any, names: tuple[str, ...] | None = None
) -> tuple[list[Any], list[list[Any]], Any]:
    """Flatten `tree` (row-sparse and `None` entries are leaves) and each of `rest` up to it.

    Returns `(leaves, rest_leaves, treedef)`. A structure mismatch raises the key-path
    error of `_protocol.tree_mismatch_error`, naming `fn_name` and, from `names`, the trees.
    """
    treedef: Any  # a PyTreeDef (jax's annotations leave its type unresolved)
    leaves, treedef = jax.tree.flatten(tree, is_leaf=is_update_leaf)
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
    return jax.tree.map(f, tree, *rest, is_leaf=is_update_leaf)


def split_leaves(f: Callable[..., tuple[Any, ...]], n: int, tree: Any, *rest: Any) -> tuple[Any, ...]:
    """`map_leaves` with `f` returning an `n`-tuple per leaf; returns `n` trees."""
    treedef: Any  # a PyTreeDef (jax's annotations leave its type unresolved)
    leaves, treedef = jax.tree.flatten(tree, is_leaf=is_update_leaf)
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


def key_paths(tree: Any) -> list[str]:
    """The key path (`jax.tree_util.keystr`) of each leaf of an update tree, in flattening order."""
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_update_leaf)[0]
    return [jax.tree_util.keystr(path) or "<root>" for path, _ in flat]
