"""`optax.projections` under `gradtx.optax_compat`: `gradtx.projections`' functions (optax's signatures and
numbers; a number as a bound of `projection_box` / `projection_hypercube` applies to every leaf of a tree,
where optax's raises a tree-structure error)."""

from gradtx import projections as _projections

__all__ = list(_projections.__all__)  # optax.projections' names, all of them gradtx's
globals().update({name: getattr(_projections, name) for name in __all__})
