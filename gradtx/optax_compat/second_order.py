"""`optax.second_order` under `gradtx.optax_compat`: `hvp`, `hessian_diag`, `fisher_diag`.

These are `gradtx.second_order`'s functions (optax's signatures and numbers). optax 0.2.8 marks
its own as deprecated (to be removed in 0.2.9) and warns on each call; these do not warn.
"""

from gradtx.second_order import fisher_diag, hessian_diag, hvp

__all__ = ["fisher_diag", "hessian_diag", "hvp"]
