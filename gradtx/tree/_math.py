"""Arithmetic over whole pytrees, leaf by leaf, with `optax.tree`'s numbers.

Each function maps one array operation over the leaves (`jax.tree.map`, so `None` is an
empty subtree and stays `None`): the operations optax maps, so the results equal optax's bit
for bit.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import docs as _docs
from gradtx._core import walk as _walk

# --------------------------------------------------------------------------- leaf by leaf
_two_trees = _docs.sections(
    TWO_TREES="""Args:
  tree_x: a pytree.
  tree_y: a pytree with the structure of `tree_x`.

Returns:
  A tree with that structure."""
)


def add(tree_x: Any, tree_y: Any, *other_trees: Any) -> Any:
    """The leaf-by-leaf sum of two or more trees of one structure.

    Args:
      tree_x: a pytree.
      tree_y: a pytree with the structure of `tree_x`.
      *other_trees: more pytrees with that structure, added too.

    Returns:
      A tree with that structure: `tree_x + tree_y + ...` at each leaf.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.add({"w": jnp.ones(2)}, {"w": jnp.ones(2)}, {"w": jnp.ones(2)})
        {'w': Array([3., 3.], dtype=float32)}
    """
    return jax.tree.map(lambda *leaves: builtins.sum(leaves), tree_x, tree_y, *other_trees)


@_two_trees
def sub(tree_x: Any, tree_y: Any) -> Any:
    """The leaf-by-leaf difference `tree_x - tree_y`.

    {TWO_TREES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.sub({"w": jnp.ones(2)}, {"w": jnp.array([3.0, 3.0])})
        {'w': Array([-2., -2.], dtype=float32)}
    """
    return jax.tree.map(operator.sub, tree_x, tree_y)


@_two_trees
def mul(tree_x: Any, tree_y: Any) -> Any:
    """The leaf-by-leaf product `tree_x * tree_y`.

    {TWO_TREES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.mul({"w": jnp.array([2.0, 2.0])}, {"w": jnp.array([3.0, 3.0])})
        {'w': Array([6., 6.], dtype=float32)}
    """
    return jax.tree.map(operator.mul, tree_x, tree_y)


@_two_trees
def div(tree_x: Any, tree_y: Any) -> Any:
    """The leaf-by-leaf quotient `tree_x / tree_y`.

    {TWO_TREES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.div({"w": jnp.array([3.0, 3.0])}, {"w": jnp.array([2.0, 2.0])})
        {'w': Array([1.5, 1.5], dtype=float32)}
    """
    return jax.tree.map(operator.truediv, tree_x, tree_y)


def scale(scalar: Any, tree: Any) -> Any:
    """Every leaf times one scalar: `scalar * tree`.

    Args:
      scalar: a number or a scalar array.
      tree: a pytree.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.scale(0.5, {"w": jnp.array([3.0, 3.0])})
        {'w': Array([1.5, 1.5], dtype=float32)}
    """
    return jax.tree.map(lambda x: scalar * x, tree)


def add_scale(tree_x: Any, scalar: Any, tree_y: Any) -> Any:
    """`tree_x + scalar * tree_y` leaf by leaf (an axpy); where `tree_x` has `None`, so does the result.

    Args:
      tree_x: a pytree.
      scalar: a number or a scalar array (taken as an array, `jnp.asarray(scalar)`).
      tree_y: a pytree with the structure of `tree_x`.

    Returns:
      A tree with the structure of `tree_x`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.add_scale({"w": jnp.ones(2), "b": None}, 0.5, {"w": jnp.array([4.0, 4.0]), "b": None})
        {'b': None, 'w': Array([3., 3.], dtype=float32)}
    """
    scalar = jnp.asarray(scalar)
    return jax.tree.map(
        lambda x, y: None if x is None else x + scalar * y, tree_x, tree_y, is_leaf=lambda x: x is None
    )


def conj(tree: Any) -> Any:
    """The complex conjugate of every leaf (a real leaf is itself).

    Args:
      tree: a pytree.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.conj({"z": jnp.array([1 + 2j])})
        {'z': Array([1.-2.j], dtype=complex64)}
    """
    return jax.tree.map(jnp.conj, tree)


def real(tree: Any) -> Any:
    """The real part of every leaf.

    Args:
      tree: a pytree.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.real({"z": jnp.array([1 + 2j])})
        {'z': Array([1.], dtype=float32)}
    """
    return jax.tree.map(jnp.real, tree)


def clip(tree: Any, min_value: Any = None, max_value: Any = None) -> Any:
    """Every leaf clipped to `[min_value, max_value]` (`jnp.clip`; a bound of None is no bound).

    Args:
      tree: a pytree.
      min_value: the lower bound, or None.
      max_value: the upper bound, or None.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.clip({"w": jnp.array([-3.0, 0.5, 3.0])}, -1.0, 1.0)
        {'w': Array([-1. ,  0.5,  1. ], dtype=float32)}
    """
    return jax.tree.map(lambda x: jnp.clip(x, min_value, max_value), tree)


def where(condition: Any, tree_x: Any, tree_y: Any) -> Any:
    """`tree_x` where `condition` holds, else `tree_y`, leaf by leaf (`jnp.where`).

    Args:
      condition: a bool (scalar, or an array every leaf broadcasts with).
      tree_x: the values taken where `condition` is true.
      tree_y: the values taken where it is false (the structure of `tree_x`).

    Returns:
      A tree with the structure of `tree_x`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.where(jnp.array(False), {"w": jnp.ones(2)}, {"w": jnp.zeros(2)})
        {'w': Array([0., 0.], dtype=float32)}
    """
    return _walk.where(condition, tree_x, tree_y)


def batch_shape(tree: Any, shape: tuple[int, ...] = ()) -> Any:
    """Every leaf broadcast to leading batch dimensions `shape`: a leaf of shape `s` gets `(*shape, *s)`.

    Args:
      tree: a pytree.
      shape: the batch dimensions put in front of each leaf's shape.

    Returns:
      A tree with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.batch_shape({"w": jnp.ones(3)}, (2,))["w"].shape
        (2, 3)
    """
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (*shape, *jnp.shape(x))), tree)
