"""How the catalogue modules register: an optimizer, a building block, a wrapper."""

from __future__ import annotations

from types import MappingProxyType

from gradtx.registry import Entry, register

TF1 = "tf.compat.v1.train"
"""The module of TF1's optimizers, for `Entry.reference`."""
CONTRIB = "tf.contrib.opt"
"""The module of tf.contrib's optimizers, for `Entry.reference`."""

BOUNDS_INF = MappingProxyType({"nan": "propagates", "inf": "absorbed", "-inf": "absorbed"})
"""`Entry.nonfinite` of a rule that bounds an infinite value (a sign, a clip) and passes NaN on."""

SIGN_OF_MOMENTUM = MappingProxyType({"nan": "propagates", "inf": "sticks", "-inf": "sticks"})
"""`Entry.nonfinite` of a step that is the sign of a momentum (Lion, Signum): an infinite gradient leaves
the momentum infinite for good, and the step at +-learning rate whatever the later gradients."""

FTRL = MappingProxyType({"nan": "sticks", "inf": "sticks", "-inf": "propagates"})
"""`Entry.nonfinite` of FTRL (TF's kernel does the same): a NaN `linear` pins the param to 0 for good; an
infinite gradient does that when it has the param's sign (+inf at the test's positive param) and makes the
param NaN otherwise."""


def optimizer(
    name, factory, aliases, example, reference, sparse="rows", extra_args=None, nonfinite="propagates"
):
    """Register an optimizer alias with its TF names and the TF class it reproduces."""
    register(
        Entry(
            name,
            factory,
            "optimizer",
            aliases=aliases,
            example=example,
            reference=reference,
            sparse=sparse,
            extra_args=extra_args,
            nonfinite=nonfinite,
        )
    )


def transform(name, factory, example=None, sparse="rows", extra_args=None, nonfinite="propagates"):
    """Register a building block (a transform of the updates)."""
    register(
        Entry(
            name,
            factory,
            "transform",
            example=example or {},
            sparse=sparse,
            extra_args=extra_args,
            nonfinite=nonfinite,
        )
    )


def wrapper(name, factory, example, sparse="rows", nonfinite="propagates"):
    """Register a wrapper (a transform of a transform)."""
    register(Entry(name, factory, "wrapper", example=example, sparse=sparse, nonfinite=nonfinite))


def global_step_arg(step: int) -> dict:
    """AdamGS's extra argument: TF's global step as read during the step (t - 1)."""
    return {"global_step": step}
