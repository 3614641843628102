"""Frontier optimizers (hessian): their catalogue rows, filled as the algorithms land."""
