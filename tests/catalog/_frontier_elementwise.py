"""Element-wise optimizers after optax's catalogue (Tiger, StableAdamW, LaProp, Grams, FAdam) and the cautious
wrapper: pytorch-optimizer's numbers (`Entry.reference` names its class)."""

from __future__ import annotations

from gradtx import optimizers
from tests.catalog._entries import SIGN_OF_MOMENTUM, optimizer


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
