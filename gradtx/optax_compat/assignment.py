"""`optax.assignment` under `gradtx.optax_compat`: `gradtx.assignment`'s Hungarian algorithm (optax's
signatures and results)."""

from gradtx.assignment import base_hungarian_algorithm, hungarian_algorithm

__all__ = ["base_hungarian_algorithm", "hungarian_algorithm"]
