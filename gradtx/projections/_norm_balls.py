"""Euclidean projections onto the simplex and onto l1 and l2 balls and spheres."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import flatten_util

from gradtx import tree as tree_math
from gradtx._core import checks as _checks
from gradtx._core import docs as _docs

_RADIUS = """Args:
  tree: the tree :math:`x` to project.
  scale: the radius, {rel}.

Returns:
  The projected tree, with the structure of `tree`.

Raises:
  ValueError: for {error}."""
radius = _docs.sections(
    RADIUS=_RADIUS.format(rel="> 0", error="a `scale` that is not positive"),
    RADIUS_NONNEGATIVE=_RADIUS.format(rel=">= 0", error="a negative `scale`"),
)
"""The norm balls' shared Args, Returns and Raises: `{RADIUS}` (> 0), `{RADIUS_NONNEGATIVE}` (>= 0)."""


@jax.custom_jvp
def _unit_simplex(values: jax.Array) -> jax.Array:
    """The projection of a vector onto the unit simplex (sort, the largest support, the threshold)."""
    n = values.shape[0]
    u = jnp.sort(values)[::-1]
    cumsum = jnp.cumsum(u)
    ind = jnp.arange(n) + 1
    support = jnp.count_nonzero(1 / ind + (u - cumsum / ind) > 0)
    return jax.nn.relu(1 / support + (values - cumsum[support - 1] / support))


@_unit_simplex.defjvp
def _unit_simplex_jvp(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
    """The projection's Jacobian on its support: the tangent, less its mean there."""
    (values,), (dot,) = primals, tangents
    out = _unit_simplex(values)
    support = out > 0
    return out, support * dot - (jnp.dot(support, dot) / jnp.count_nonzero(support)) * support


def projection_simplex(tree: Any, scale: Any = 1) -> Any:
    r"""Projection onto the simplex of sum `scale`: non-negative elements summing to `scale`.

    .. math:: \underset{p}{\operatorname{argmin}}\ \lVert x - p \rVert_2^2 \quad \text{subject to}
        \quad p \ge 0,\ p^\top \mathbf{1} = \text{scale}

    over all elements of the tree together (the probability simplex by default), by sorting
    (Duchi et al. 2008); differentiable, with the projection's Jacobian on its support
    (`optax.projections.projection_simplex`).

    Args:
      tree: the tree :math:`x` to project.
      scale: the sum, > 0.

    Returns:
      The projected tree, with the structure of `tree`.

    Raises:
      ValueError: for a `scale` that is not positive.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_simplex(jnp.array([2.0, 1.0, -1.0]))  # threshold 0.5
        Array([1., 0., 0.], dtype=float32)

    References:
      Duchi, Shalev-Shwartz, Singer, Chandra, *Efficient projections onto the l1-ball for
      learning in high dimensions*, ICML 2008.
    """
    _checks.check_positive("projection_simplex", "scale", scale)
    values, unravel = flatten_util.ravel_pytree(tree)
    return unravel(scale * _unit_simplex(values / scale))


@radius
def projection_l1_sphere(tree: Any, scale: Any = 1) -> Any:
    r"""Projection onto the l1 sphere of radius `scale`.

    .. math:: \underset{y}{\operatorname{argmin}}\ \lVert x - y \rVert_2^2 \quad \text{subject to}
        \quad \lVert y \rVert_1 = \text{scale}

    the signs of :math:`x` times the projection of :math:`|x|` onto the simplex
    (`optax.projections.projection_l1_sphere`).

    {RADIUS}

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_l1_sphere(jnp.array([0.25, -0.25]))
        Array([ 0.5, -0.5], dtype=float32)
    """
    _checks.check_positive("projection_l1_sphere", "scale", scale)
    return tree_math.mul(jax.tree.map(jnp.sign, tree), projection_simplex(jax.tree.map(jnp.abs, tree), scale))


@radius
def projection_l1_ball(tree: Any, scale: Any = 1) -> Any:
    r"""Projection onto the l1 ball of radius `scale`: a point inside stays, one outside goes to the sphere.

    .. math:: \underset{y}{\operatorname{argmin}}\ \lVert x - y \rVert_2^2 \quad \text{subject to}
        \quad \lVert y \rVert_1 \le \text{scale}

    (`optax.projections.projection_l1_ball`).

    {RADIUS}

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_l1_ball(jnp.array([2.0, -1.0]))  # the sphere's point
        Array([ 1., -0.], dtype=float32)
    """
    _checks.check_positive("projection_l1_ball", "scale", scale)
    inside = tree_math.norm(tree, ord=1) <= scale
    return jax.lax.cond(inside, lambda t: t, lambda t: projection_l1_sphere(t, scale), tree)


@radius
def projection_l2_sphere(tree: Any, scale: Any = 1) -> Any:
    r"""Projection onto the l2 sphere of radius `scale`: the tree rescaled to norm `scale`.

    .. math:: \underset{y}{\operatorname{argmin}}\ \lVert x - y \rVert_2^2 \quad \text{subject to}
        \quad \lVert y \rVert_2 = \text{scale}

    the norm of all elements together (`optax.projections.projection_l2_sphere`; the zero
    tree has no projection: NaN).

    {RADIUS_NONNEGATIVE}

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_l2_sphere(jnp.array([3.0, 4.0]))
        Array([0.6, 0.8], dtype=float32)
    """
    _checks.check_nonnegative("projection_l2_sphere", "scale", scale)
    return tree_math.scale(scale / tree_math.norm(tree), tree)


@radius
def projection_l2_ball(tree: Any, scale: Any = 1) -> Any:
    r"""Projection onto the l2 ball of radius `scale`: a point inside stays, one outside is rescaled.

    .. math:: \underset{y}{\operatorname{argmin}}\ \lVert x - y \rVert_2^2 \quad \text{subject to}
        \quad \lVert y \rVert_2 \le \text{scale}, \qquad
        y = x \cdot \frac{\text{scale}}{\max(\lVert x \rVert_2, \text{scale})}

    (`optax.projections.projection_l2_ball`).

    {RADIUS}

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import projections
        >>> projections.projection_l2_ball(jnp.array([3.0, 4.0]), scale=10.0)  # inside: kept
        Array([3., 4.], dtype=float32)
    """
    _checks.check_positive("projection_l2_ball", "scale", scale)
    squared_norm = tree_math.norm(tree, squared=True)
    return tree_math.scale(scale / jnp.sqrt(jnp.maximum(squared_norm, scale**2)), tree)
