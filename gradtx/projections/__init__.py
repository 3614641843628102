"""Euclidean projections of pytrees onto convex sets (`optax.projections`): after a step, map the parameters
back into their constraint set (projected gradient descent)."""

from gradtx.projections._affine import projection_halfspace, projection_hyperplane, projection_vector
from gradtx.projections._boxes import (
    projection_box,
    projection_hypercube,
    projection_linf_ball,
    projection_non_negative,
)
from gradtx.projections._norm_balls import (
    projection_l1_ball,
    projection_l1_sphere,
    projection_l2_ball,
    projection_l2_sphere,
    projection_simplex,
)

__all__ = [
    "projection_box",
    "projection_halfspace",
    "projection_hypercube",
    "projection_hyperplane",
    "projection_l1_ball",
    "projection_l1_sphere",
    "projection_l2_ball",
    "projection_l2_sphere",
    "projection_linf_ball",
    "projection_non_negative",
    "projection_simplex",
    "projection_vector",
]
