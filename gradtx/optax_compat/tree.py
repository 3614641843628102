"""`optax.tree` under `gradtx.optax_compat`: `gradtx.tree`, whose names and numbers are optax's."""

from gradtx.tree import *  # noqa: F403
from gradtx.tree import __all__ as __all__
