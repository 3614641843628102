"""Frontier optimizers (spam): their catalogue rows, filled as the algorithms land."""
