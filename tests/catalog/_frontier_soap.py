"""Frontier optimizers (soap): their catalogue rows: pytorch-optimizer's SOAP (`Entry.reference` names its
class) and its building block."""

from __future__ import annotations

from gradtx import optimizers, transforms
from tests.catalog._entries import optimizer, transform


def _decaying(count):
    """An example rate: a decaying schedule."""
    return 0.05 * 0.995**count


optimizer(
    "soap",
    optimizers.soap,
    (),
    {"learning_rate": _decaying, "precondition_frequency": 2},
    "pytorch_optimizer.SOAP",
    sparse="dense",
)
transform("scale_by_soap", transforms.scale_by_soap, {"precondition_frequency": 2}, sparse="dense")
