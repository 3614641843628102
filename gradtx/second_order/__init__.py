"""Second-order quantities of a loss `loss(params, inputs, targets)`: `hvp`, `hessian_diag`, `fisher_diag`."""

from gradtx.second_order._hessian import fisher_diag, hessian_diag, hvp

__all__ = ["fisher_diag", "hessian_diag", "hvp"]
