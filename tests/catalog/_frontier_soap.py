"""Frontier optimizers (soap): their catalogue rows, filled as the algorithms land."""
