"""Element-wise optimizers after optax's catalogue (Tiger, StableAdamW, LaProp, Grams, FAdam) and the cautious
wrapper: pytorch-optimizer's numbers (`Entry.reference` names its class)."""

from __future__ import annotations

from gradtx import optimizers, transforms
from tests.catalog._entries import SIGN_OF_MOMENTUM, optimizer, transform, wrapper


def _sign_rate(count):
    """An example rate for the sign steps: a decaying schedule."""
    return 0.05 * 0.99**count


optimizer(
    "tiger",
    optimizers.tiger,
    (),
    {"learning_rate": _sign_rate},
    "pytorch_optimizer.Tiger",
    sparse="dense",
    nonfinite=SIGN_OF_MOMENTUM,
)
wrapper(
    "cautious",
    optimizers.cautious,
    {"inner": optimizers.lion(_sign_rate, weight_decay=0.0), "negated": True},
    sparse="dense",
    nonfinite=SIGN_OF_MOMENTUM,
)
optimizer(
    "stable_adamw",
    optimizers.stable_adamw,
    (),
    {"learning_rate": 0.01},
    "pytorch_optimizer.StableAdamW",
    sparse="dense",
)
transform("scale_by_stable_adamw", transforms.scale_by_stable_adamw, {"weight_decay": 0.01}, sparse="dense")
optimizer(
    "laprop", optimizers.laprop, (), {"learning_rate": 0.05}, "pytorch_optimizer.LaProp", sparse="dense"
)
optimizer("grams", optimizers.grams, (), {"learning_rate": 0.05}, "pytorch_optimizer.Grams", sparse="dense")
transform("scale_by_grams", transforms.scale_by_grams, {}, sparse="dense")
optimizer("fadam", optimizers.fadam, (), {"learning_rate": 0.05}, "pytorch_optimizer.FAdam", sparse="dense")
transform("scale_by_fadam", transforms.scale_by_fadam, {}, sparse="dense")
