"""Frontier optimizers (kron): their catalogue rows, filled as the algorithms land."""
