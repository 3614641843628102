"""Euclidean projections onto boxes: the non-negative orthant, a box, the hypercube, the l-infinity ball."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx.projections._norm_balls import radius


def _bound_for(bound: Any, tree: Any) -> Any:
    """A bound as a tree like `tree`: a tree of that structure as it is, a number or array for every leaf."""
    treedef: Any = jax.tree.structure(tree)  # PyTreeDefs (jax's annotations leave their type unresolved)
    bound_def: Any = jax.tree.structure(bound)
    if bound_def == treedef:
        return bound
    if bound_def.num_leaves == 1 and not isinstance(bound, (dict, list, tuple)):
        return jax.tree.unflatten(treedef, [bound] * treedef.num_leaves)
    raise ValueError(
        f"`{_checks.api_name('projection_box')}`: a bound must be a number, an array, or a tree with the "
        f"structure of `tree`; got {bound_def} for {treedef}."
    )


def projection_non_negative(tree: Any) -> Any:
    r"""Projection onto the non-negative orthant: every element clipped at 0.

    .. math:: \underset{p}{\operatorname{argmin}}\ \lVert x - p \rVert_2^2
        \quad \text{subject to} \quad p \ge 0

    (`optax.projections.projection_non_negative`).

    Args:
      tree: the tree :math:`x` to project.

    Returns:
      The projected tree, with the structure of `tree`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_non_negative(jnp.array([-1.0, 2.0]))
        Array([0., 2.], dtype=float32)
    """
    return jax.tree.map(jax.nn.relu, tree)


def projection_box(tree: Any, lower: Any, upper: Any) -> Any:
    r"""Projection onto a box: every element clipped to `[lower, upper]`.

    .. math:: \underset{p}{\operatorname{argmin}}\ \lVert x - p \rVert_2^2 \quad \text{subject to}
        \quad \text{lower} \le p \le \text{upper}

    (`optax.projections.projection_box`; a number or array as a bound applies to every leaf,
    where optax's wants a tree for a tree).

    Args:
      tree: the tree :math:`x` to project.
      lower: the lower bound: a number, an array, or a tree with the structure of `tree`.
      upper: the upper bound, likewise.

    Returns:
      The projected tree, with the structure of `tree`.

    Raises:
      ValueError: for a bound that is a tree of another structure.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_box({"w": jnp.array([-2.0, 0.5, 3.0])}, -1.0, 1.0)
        {'w': Array([-1. ,  0.5,  1. ], dtype=float32)}
    """
    return jax.tree.map(jnp.clip, tree, _bound_for(lower, tree), _bound_for(upper, tree))


def projection_hypercube(tree: Any, scale: Any = 1) -> Any:
    r"""Projection onto the hypercube `[0, scale]` (the unit hypercube by default).

    .. math:: \underset{p}{\operatorname{argmin}}\ \lVert x - p \rVert_2^2 \quad \text{subject to}
        \quad 0 \le p \le \text{scale}

    `projection_box(tree, 0, scale)` (`optax.projections.projection_hypercube`).

    Args:
      tree: the tree :math:`x` to project.
      scale: the upper bound: a number, an array or a tree with the structure of `tree`.

    Returns:
      The projected tree, with the structure of `tree`.

    Raises:
      ValueError: for a `scale` that is a tree of another structure.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_hypercube(jnp.array([-2.0, 0.5, 3.0]))
        Array([0. , 0.5, 1. ], dtype=float32)
    """
    return projection_box(tree, lower=0, upper=scale)


@radius
def projection_linf_ball(tree: Any, scale: Any = 1) -> Any:
    r"""Projection onto the l-infinity ball of radius `scale`: every element clipped to `[-scale, scale]`.

    .. math:: \underset{y}{\operatorname{argmin}}\ \lVert x - y \rVert_2^2 \quad \text{subject to}
        \quad \lVert y \rVert_\infty \le \text{scale}

    (`optax.projections.projection_linf_ball`).

    {RADIUS_NONNEGATIVE}

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_linf_ball(jnp.array([-2.0, 0.5, 3.0]))
        Array([-1. ,  0.5,  1. ], dtype=float32)
    """
    _checks.check_nonnegative("projection_linf_ball", "scale", scale)
    lower = jax.tree.map(lambda x: jnp.full_like(x, -scale), tree)
    upper = jax.tree.map(lambda x: jnp.full_like(x, scale), tree)
    return projection_box(tree, lower, upper)
