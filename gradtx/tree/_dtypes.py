"""Dtypes of whole trees: reading one, casting to one, and trees of constants shaped like another."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks

_HANDLERS = (None, "promote", "highest", "lowest")


def cast(tree: Any, dtype: Any) -> Any:
    """Every leaf cast to `dtype` (`x.astype(dtype)`); with `dtype=None`, the tree as it is.

    Args:
      tree: a pytree of arrays.
      dtype: the dtype to cast to, or None to leave the tree alone.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.cast({"w": jnp.ones(2)}, jnp.bfloat16)
        {'w': Array([1, 1], dtype=bfloat16)}
    """
    if dtype is None:
        return tree
    return jax.tree.map(lambda x: x.astype(dtype), tree)


def cast_like(tree: Any, other_tree: Any) -> Any:
    """Every leaf cast to the dtype of the leaf at its place in `other_tree` (kept where that has no dtype).

    Args:
      tree: a pytree of arrays.
      other_tree: a pytree with the structure of `tree`, whose leaves give the dtypes.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> like = {"w": jnp.ones(2, jnp.bfloat16), "b": 0.0}
        >>> gradtx.tree.cast_like({"w": jnp.ones(2), "b": jnp.ones(1)}, like)
        {'b': Array([1.], dtype=float32), 'w': Array([1, 1], dtype=bfloat16)}
    """
    return jax.tree.map(lambda x, o: x.astype(o.dtype) if hasattr(o, "dtype") else x, tree, other_tree)


def _lower(a: Any, b: Any) -> Any:
    """Of two dtypes, the one that promotes to the other."""
    joined = jnp.promote_types(a, b)
    if joined == a:
        return b
    if joined == b:
        return a
    raise ValueError(
        f"`gradtx.tree.dtype`: {a} and {b} are not ordered (neither promotes to the other), so there is no "
        "highest or lowest of them; pass `mixed_dtype_handler='promote'` for the dtype both promote to."
    )


def _higher(a: Any, b: Any) -> Any:
    """Of two dtypes, the one the other promotes to."""
    return b if _lower(a, b) == a else a


def dtype(tree: Any, mixed_dtype_handler: str | None = None) -> Any:
    """The dtype of a tree's leaves.

    Without leaves, JAX's default float dtype. Where the leaves differ, `mixed_dtype_handler`
    decides: None refuses; ``"promote"`` gives the dtype they all promote to
    (`jnp.promote_types`); ``"highest"`` / ``"lowest"`` the leaf dtype every other one promotes
    to / from (dtypes ordered by promotion; some pairs, like int32 and uint32, are not).

    Args:
      tree: a pytree of arrays (or numbers, or `jax.ShapeDtypeStruct` leaves).
      mixed_dtype_handler: None, ``"promote"``, ``"highest"`` or ``"lowest"``.

    Returns:
      A numpy dtype.

    Raises:
      ValueError: for leaves of several dtypes with `mixed_dtype_handler=None` (naming each
        leaf's path and dtype), for two unordered dtypes with ``"highest"`` or ``"lowest"``,
        and for any other `mixed_dtype_handler`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tree = {"a": jnp.ones(1, jnp.float16), "b": jnp.ones(1)}
        >>> gradtx.tree.dtype(tree, "lowest"), gradtx.tree.dtype(tree, "highest")
        (dtype('float16'), dtype('float32'))
    """
    _checks.check_one_of("gradtx.tree.dtype", "mixed_dtype_handler", mixed_dtype_handler, _HANDLERS)
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return jnp.asarray([]).dtype
    dtypes = [jnp.dtype(x.dtype) if hasattr(x, "dtype") else jnp.asarray(x).dtype for x in leaves]
    if mixed_dtype_handler == "promote":
        return functools.reduce(jnp.promote_types, dtypes)
    if mixed_dtype_handler == "highest":
        return functools.reduce(_higher, dtypes)
    if mixed_dtype_handler == "lowest":
        return functools.reduce(_lower, dtypes)
    if any(d != dtypes[0] for d in dtypes):
        paths = [jax.tree_util.keystr(p) or "<root>" for p, _ in jax.tree_util.tree_leaves_with_path(tree)]
        each = ", ".join(f"{p}: {d}" for p, d in zip(paths, dtypes, strict=True))
        raise ValueError(
            f"`gradtx.tree.dtype`: the leaves have several dtypes ({each}); pass `mixed_dtype_handler` "
            "('promote', 'highest' or 'lowest') to get one of them."
        )
    return dtypes[0]


def zeros_like(tree: Any, dtype: Any = None) -> Any:
    """A tree of zeros with the structure, shapes and (unless `dtype` is given) dtypes of `tree`.

    Args:
      tree: a pytree of arrays.
      dtype: the dtype of every leaf of the result, or None for each leaf's own.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.zeros_like({"w": jnp.ones(2)})
        {'w': Array([0., 0.], dtype=float32)}
    """
    return jax.tree.map(lambda x: jnp.zeros_like(x, dtype=dtype), tree)


def ones_like(tree: Any, dtype: Any = None) -> Any:
    """A tree of ones with the structure, shapes and (unless `dtype` is given) dtypes of `tree`.

    Args:
      tree: a pytree of arrays.
      dtype: the dtype of every leaf of the result, or None for each leaf's own.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.ones_like({"w": jnp.zeros(2)}, jnp.int32)
        {'w': Array([1, 1], dtype=int32)}
    """
    return jax.tree.map(lambda x: jnp.ones_like(x, dtype=dtype), tree)


def full_like(tree: Any, fill_value: Any, dtype: Any = None) -> Any:
    """A tree of `fill_value` with the structure, shapes and (unless `dtype` is given) dtypes of `tree`.

    Args:
      tree: a pytree of arrays.
      fill_value: the value of every element.
      dtype: the dtype of every leaf of the result, or None for each leaf's own.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.full_like({"w": jnp.zeros(2)}, 7.0)
        {'w': Array([7., 7.], dtype=float32)}
    """
    return jax.tree.map(lambda x: jnp.full_like(x, fill_value, dtype=dtype), tree)
