"""`optax.projections` under `gradtx.optax_compat`: `gradtx.projections`' functions (optax's signatures and
numbers; a number as a bound of `projection_box` / `projection_hypercube` applies to every leaf of a tree,
where optax's raises a tree-structure error)."""

from gradtx.projections import (
    projection_box,
    projection_halfspace,
    projection_hypercube,
    projection_hyperplane,
    projection_l1_ball,
    projection_l1_sphere,
    projection_l2_ball,
    projection_l2_sphere,
    projection_linf_ball,
    projection_non_negative,
    projection_simplex,
    projection_vector,
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
