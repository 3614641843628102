"""Frontier optimizers (kron): their catalogue rows: PSGD Kron, pytorch-optimizer's `Kron` (`Entry.reference`
names its class; psgd-jax's `kron` is a configuration of it) and its building block."""

from __future__ import annotations

from gradtx import optimizers, transforms
from tests.catalog._entries import optimizer, transform


def _decaying(count):
    """An example rate: a decaying schedule."""
    return 0.05 * 0.995**count


optimizer(
    "psgd_kron",
    optimizers.psgd_kron,
    (),
    {"learning_rate": _decaying, "weight_decay": 0.01, "precond_update_probability": 0.5},
    "pytorch_optimizer.Kron",
    sparse="dense",
)
# the building block with diagonal factors (psgd_kron's example keeps the triangular ones): the contract
# is the state's, and each triangular factor costs its leaf a compile of solves and norms
transform(
    "scale_by_psgd_kron",
    transforms.scale_by_psgd_kron,
    {"balance_prob": 0.5, "memory_save_mode": "all_diag"},
    sparse="dense",
)
