"""`optax.experimental.aggregating` under `gradtx.optax_compat`: `gradtx.aggregating`'s names, which are
optax's (signatures, state layouts and numbers)."""

from gradtx.aggregating import *  # noqa: F403
from gradtx.aggregating import __all__ as __all__
