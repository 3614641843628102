"""`optax.losses` under `gradtx.optax_compat`: `gradtx.losses`, optax's losses with optax's numbers."""

from gradtx.losses import *  # noqa: F403
from gradtx.losses import __all__ as __all__
