"""Euclidean projections onto affine sets: a vector's line, a hyperplane, a halfspace."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from gradtx import tree as tree_math


def projection_vector(x: Any, a: Any) -> Any:
    r"""Projection of the tree `x` onto the line of the tree `a`.

    .. math:: \operatorname{proj}_a x = \frac{\langle x, a \rangle}{\langle a, a \rangle}\, a

    (`optax.projections.projection_vector`).

    Args:
      x: the tree to project.
      a: the direction, a tree with the structure of `x` (not zero).

    Returns:
      A tree with the structure of `x`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_vector(jnp.array([2.0, 1.0]), jnp.array([1.0, 1.0]))
        Array([1.5, 1.5], dtype=float32)
    """
    return tree_math.scale(tree_math.vdot(x, a) / tree_math.vdot(a, a), a)


def projection_hyperplane(x: Any, a: Any, b: Any) -> Any:
    r"""Projection onto the hyperplane :math:`\langle a, y \rangle = b`.

    .. math:: \underset{y}{\operatorname{argmin}}\ \lVert x - y \rVert_2^2 \quad \text{subject to}
        \quad \langle a, y \rangle = b, \qquad
        y = x + \frac{b - \langle a, x \rangle}{\langle a, a \rangle}\, a

    (`optax.projections.projection_hyperplane`).

    Args:
      x: the tree to project.
      a: the normal, a tree with the structure of `x` (not zero).
      b: the offset, a scalar.

    Returns:
      A tree with the structure of `x`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_hyperplane(jnp.array([2.0, 0.0]), jnp.array([1.0, 1.0]), 1.0)
        Array([ 1.5, -0.5], dtype=float32)
    """
    return tree_math.add_scale(x, (b - tree_math.vdot(x, a)) / tree_math.vdot(a, a), a)


def projection_halfspace(x: Any, a: Any, b: Any) -> Any:
    r"""Projection onto the halfspace :math:`\langle a, y \rangle \le b`: a point inside stays.

    .. math:: \underset{y}{\operatorname{argmin}}\ \lVert x - y \rVert_2^2 \quad \text{subject to}
        \quad \langle a, y \rangle \le b, \qquad
        y = x + \min\!\Big(0, \frac{b - \langle a, x \rangle}{\langle a, a \rangle}\Big)\, a

    (`optax.projections.projection_halfspace`).

    Args:
      x: the tree to project.
      a: the normal, a tree with the structure of `x` (not zero).
      b: the offset, a scalar.

    Returns:
      A tree with the structure of `x`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_halfspace(jnp.array([2.0, 0.0]), jnp.array([1.0, 1.0]), 1.0)
        Array([ 1.5, -0.5], dtype=float32)
    """
    step = jnp.clip((b - tree_math.vdot(x, a)) / tree_math.vdot(a, a), max=0)
    return tree_math.add_scale(x, step, a)
