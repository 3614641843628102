"""Reductions of whole pytrees to one number (sums, extremes, norms, inner products), as optax reduces.

Each leaf is reduced on its own, then the leaves' results are folded left to right from
`0` (sums) or `-inf` / `inf` (max / min), in the order optax folds them: the same operations
on the same values, so the results equal optax's bit for bit.
"""

from __future__ import annotations

import builtins
import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import formulas as _formulas


def _leaf_vdot(a: Any, b: Any) -> jax.Array:
    """`<a, b>` of two leaves of one shape (`a` conjugated), in HIGHEST precision, as `jnp.vdot` takes it.

    Where `a` lives on a mesh whose axes are all Explicit, `jnp.vdot` (which flattens) cannot
    run; there the contraction is a `tensordot` over every axis with a replicated result.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.shape != b.shape:
        raise ValueError(
            f"`gradtx.tree.vdot`: two leaves have shapes {a.shape} and {b.shape}; the inner product "
            "pairs leaves of one shape (pass trees whose leaves have equal shapes)."
        )
    highest = jax.lax.Precision.HIGHEST
    mesh = jax.typeof(a).sharding.mesh
    if not mesh.are_all_axes_explicit:
        return jnp.vdot(a, b, precision=highest)
    a = jnp.conj(a) if jnp.issubdtype(a.dtype, jnp.complexfloating) else a
    replicated = jax.sharding.NamedSharding(mesh, jax.P())
    return jnp.tensordot(a, b, a.ndim, precision=highest, out_sharding=replicated)


def vdot(tree_x: Any, tree_y: Any) -> Any:
    """The inner product of two trees: the sum over leaves of `vdot(x, y)` (`x` conjugated).

    Each leaf's product is taken in the highest matmul precision.

    Args:
      tree_x: a pytree (conjugated where complex).
      tree_y: a pytree with the structure of `tree_x`, its leaves of the same shapes.

    Returns:
      A scalar (`0` for a tree without leaves).

    Raises:
      ValueError: when two paired leaves differ in shape.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.vdot({"a": jnp.array([1.0, 2.0])}, {"a": jnp.array([3.0, 4.0])})
        Array(11., dtype=float32)
    """
    return jax.tree.reduce(operator.add, jax.tree.map(_leaf_vdot, tree_x, tree_y), initializer=0)


def sum(tree: Any, associative_reduction: bool = False) -> Any:
    """The sum of every element of every leaf.

    Each leaf is summed (`jnp.sum`), then the leaves' sums are added left to right from `0`.

    Args:
      tree: a pytree.
      associative_reduction: add the leaves' sums as a balanced tree of additions
        (`jax.tree.reduce_associative`): faster to compile for many leaves, rounded
        differently.

    Returns:
      A scalar (`0` for a tree without leaves).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.sum({"a": jnp.ones(2), "b": jnp.ones(3)})
        Array(5., dtype=float32)
    """
    sums = jax.tree.map(jnp.sum, tree)
    if associative_reduction:
        return jax.tree.reduce_associative(operator.add, sums, identity=0)
    return jax.tree.reduce(operator.add, sums, initializer=0)


def _leaf_extreme(reduce: Any) -> Any:
    """`reduce` of a leaf, or None (no element to compare) for an empty one."""
    return lambda x: None if jnp.size(x) == 0 else reduce(x)


def max(tree: Any) -> Any:
    """The largest element of any leaf (`-inf` for a tree without elements).

    Args:
      tree: a pytree.

    Returns:
      A scalar.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.max({"a": jnp.array([1.0, 5.0]), "b": jnp.array([2.0])})
        Array(5., dtype=float32)
    """
    lowest: Any = -float("inf")
    return jax.tree.reduce(jnp.maximum, jax.tree.map(_leaf_extreme(jnp.max), tree), initializer=lowest)


def min(tree: Any) -> Any:
    """The smallest element of any leaf (`inf` for a tree without elements).

    Args:
      tree: a pytree.

    Returns:
      A scalar.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.min({"a": jnp.array([1.0, 5.0]), "b": jnp.array([2.0])})
        Array(1., dtype=float32)
    """
    highest: Any = float("inf")
    return jax.tree.reduce(jnp.minimum, jax.tree.map(_leaf_extreme(jnp.min), tree), initializer=highest)


def size(tree: Any) -> int:
    """The number of elements in all leaves together.

    Args:
      tree: a pytree.

    Returns:
      A Python int.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.size({"a": jnp.ones((2, 3)), "b": jnp.ones(4)})
        10
    """
    return builtins.sum(jnp.size(x) for x in jax.tree.leaves(tree))


_ORDS = "None, 1, 2 or inf (also 'inf', 'infinity')"


def norm(tree: Any, ord: int | str | float | None = None, squared: bool = False) -> jax.Array:
    r"""The vector norm of all leaves together, as if they were one flat vector.

    .. math::
        \|x\|_2 = \sqrt{\textstyle\sum_i |x_i|^2}, \qquad
        \|x\|_1 = \textstyle\sum_i |x_i|, \qquad
        \|x\|_\infty = \max_i |x_i|

    `|x|^2` of a complex element is `re^2 + im^2`. The sums are `sum`'s (each leaf, then the
    leaves left to right), in the leaves' own dtype (optax's order of operations; the
    clipping combinators' `global_norm` is TF's, in at least float32).

    Args:
      tree: a pytree.
      ord: the order: None or 2 (Euclidean), 1, or `inf` (`jnp.inf`, ``"inf"``,
        ``"infinity"``).
      squared: return the norm squared (for `ord=2`, the sum of squares without the root).

    Returns:
      A scalar array.

    Raises:
      ValueError: for any other `ord`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.norm({"a": jnp.array([3.0]), "b": jnp.array([4.0])})
        Array(5., dtype=float32)
        >>> gradtx.tree.norm({"a": jnp.array([3.0]), "b": jnp.array([-4.0])}, ord=1)
        Array(7., dtype=float32)
    """
    if ord is None or ord == 2:
        squares = sum(jax.tree.map(_formulas.abs_sq, tree))
        return jnp.array(squares if squared else jnp.sqrt(squares))
    if ord == 1:
        value = sum(jax.tree.map(jnp.abs, tree))
    elif ord == jnp.inf or ord in ("inf", "infinity"):
        value = max(jax.tree.map(jnp.abs, tree))
    else:
        raise ValueError(f"`gradtx.tree.norm`: `ord` must be {_ORDS}; got {ord!r}.")
    return jnp.array(_formulas.abs_sq(value) if squared else value)


def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """Whether every pair of leaves is close (`jnp.allclose`): `|a - b| <= atol + rtol * |b|` everywhere.

    Args:
      a: a pytree.
      b: a pytree with the structure of `a`.
      rtol: the relative tolerance.
      atol: the absolute tolerance.
      equal_nan: count NaNs at the same place as equal.

    Returns:
      A bool scalar (`True` for trees without leaves).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> bool(gradtx.tree.allclose({"w": jnp.ones(2)}, {"w": jnp.ones(2) + 1e-9}))
        True
    """
    close = jax.tree.map(functools.partial(jnp.allclose, rtol=rtol, atol=atol, equal_nan=equal_nan), a, b)
    return functools.reduce(operator.and_, jax.tree.leaves(close), True)
