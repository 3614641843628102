"""Frontier optimizers (adam): their catalogue rows, filled as the algorithms land."""
