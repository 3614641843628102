"""Frontier optimizers (muon): their catalogue rows, filled as the algorithms land."""
