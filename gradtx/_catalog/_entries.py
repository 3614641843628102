"""How the catalogue modules register: an optimizer, a building block, a wrapper."""

from __future__ import annotations

from gradtx.registry import Entry, register

TF1 = "tf.compat.v1.train"
"""The module of TF1's optimizers, for `Entry.reference`."""
CONTRIB = "tf.contrib.opt"
"""The module of tf.contrib's optimizers, for `Entry.reference`."""


def optimizer(name, factory, aliases, example, reference, sparse="rows", extra_args=None):
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
        )
    )


def transform(name, factory, example=None, sparse="rows", extra_args=None):
    """Register a building block (a transform of the updates)."""
    register(Entry(name, factory, "transform", example=example or {}, sparse=sparse, extra_args=extra_args))


def wrapper(name, factory, example, sparse="rows"):
    """Register a wrapper (a transform of a transform)."""
    register(Entry(name, factory, "wrapper", example=example, sparse=sparse))


def global_step_arg(step: int) -> dict:
    """AdamGS's extra argument: TF's global step as read during the step (t - 1)."""
    return {"global_step": step}
