"""Frontier optimizers (adam): MARS, Adam-mini, CAME, APOLLO, pytorch-optimizer's numbers (`Entry.reference`
names its class)."""

from __future__ import annotations

from gradtx import optimizers, transforms
from tests.catalog._entries import optimizer, transform


def _rate(count):
    """An example rate: a decaying schedule."""
    return 0.05 * 0.995**count


optimizer(
    "mars",
    optimizers.mars,
    (),
    {"learning_rate": _rate, "learning_rate_1d": 0.05, "weight_decay": 0.01},
    "pytorch_optimizer.MARS",
    sparse="dense",
)
transform("scale_by_mars", transforms.scale_by_mars, {"b1": 0.9, "gamma": 0.05}, sparse="dense")
optimizer(
    "adam_mini",
    optimizers.adam_mini,
    (),
    {"learning_rate": _rate, "weight_decay": 0.01, "embed_blocks": ("embed", "b")},
    "pytorch_optimizer.AdamMini",
    sparse="dense",
)
transform("scale_by_adam_mini", transforms.scale_by_adam_mini, {"b2": 0.99}, sparse="dense")
optimizer(
    "came",
    optimizers.came,
    (),
    {"learning_rate": _rate, "weight_decay": 0.01},
    "pytorch_optimizer.CAME",
    sparse="dense",
)
transform("scale_by_came", transforms.scale_by_came, {"b3": 0.999}, sparse="dense")
optimizer(
    "apollo",
    optimizers.apollo,
    (),
    {"learning_rate": _rate, "rank": 2, "update_proj_gap": 10, "weight_decay": 0.01},
    "pytorch_optimizer.APOLLO",
    sparse="dense",
)
transform("scale_by_apollo", transforms.scale_by_apollo, {"rank": 1, "scale_type": "channel"}, sparse="dense")
