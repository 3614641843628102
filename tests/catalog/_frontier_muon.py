"""Frontier optimizers (muon): their catalogue rows, filled as the algorithms land: pytorch-optimizer's Muon
family (`Entry.reference` names its class)."""

from __future__ import annotations

import jax.numpy as jnp

from gradtx import optimizers, transforms
from tests.catalog._entries import optimizer, transform


def _decaying(count):
    """An example rate: a decaying schedule."""
    return 0.2 * 0.99**count


optimizer(
    "normuon",
    optimizers.normuon,
    (),
    {"learning_rate": _decaying, "adam_learning_rate": 0.05, "weight_decay": 1e-4},
    "pytorch_optimizer.NorMuon",
    sparse="dense",
)
optimizer(
    "adamuon",
    optimizers.adamuon,
    (),
    {"learning_rate": _decaying, "adam_learning_rate": 0.05, "weight_decay": 1e-4},
    "pytorch_optimizer.AdaMuon",
    sparse="dense",
)
optimizer(
    "scion",
    optimizers.scion,
    (),
    {"learning_rate": _decaying, "momentum": 0.5, "weight_decay": 1e-4},
    "pytorch_optimizer.SCION",
    sparse="dense",
)
optimizer(
    "scion_light",
    optimizers.scion_light,
    (),
    {"learning_rate": _decaying, "momentum": 0.5, "weight_decay": 1e-4},
    "pytorch_optimizer.SCIONLight",
    sparse="dense",
)


def _matrices_are_queries(path):
    """QK-clip's example: the contract problems' kernels (`.../kernel`) as attention queries."""
    return ("attn", "query") if path.rsplit("/", 1)[-1] == "kernel" else None


def _logits(step):
    """QK-clip's extra argument: one head's maximum logit, over the threshold 100 at the first step only."""
    return {"attention_max_logits": {"attn": jnp.where(step == 0, jnp.array([120.0]), jnp.array([90.0]))}}


optimizer(
    "muon_clip",
    optimizers.muon_clip,
    (),
    {
        "learning_rate": _decaying,
        "adam_learning_rate": 0.05,
        "weight_decay": 1e-4,
        "qk_clip": _matrices_are_queries,
    },
    "pytorch_optimizer.MuonClip",
    sparse="dense",
    extra_args=_logits,
)
transform(
    "qk_clip",
    transforms.qk_clip,
    {"qk_clip": _matrices_are_queries, "threshold": 100.0, "alpha": 0.5},
    sparse="dense",
    extra_args=_logits,
)
