"""`optax.experimental` under `gradtx.optax_compat`: its one module, `aggregating` (`gradtx.aggregating`)."""

from gradtx.optax_compat.experimental import aggregating

__all__ = ["aggregating"]
