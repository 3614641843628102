"""Learning-rate-free optimizers (Prodigy, D-Adapted AdamW, Mechanic, COCOB, DoG, DoWG, Polyak SGD) and their
building blocks: optax's numbers (`Entry.reference` names the optax function).

Every one densifies a row-sparse gradient: its step sizes come from sums over every element
(or, for COCOB, from per-element wealth that moves on every row).
"""

from __future__ import annotations

from gradtx import optimizers, transforms
from gradtx._algorithms import mechanic as _mechanic
from tests.catalog._entries import Entry, optimizer, register

OPTAX_CONTRIB = "optax.contrib"
"""The module of optax's contributed optimizers, for `Entry.reference`."""

optimizer("prodigy", optimizers.prodigy, ("Prodigy",), {}, f"{OPTAX_CONTRIB}.prodigy", sparse="dense")
optimizer(
    "dadapt_adamw",
    optimizers.dadapt_adamw,
    ("DAdaptAdamW",),
    {},
    f"{OPTAX_CONTRIB}.dadapt_adamw",
    sparse="dense",
)
# an optimizer around its base optimizer (as SAM): its own bets read the gradient, so it does not pass the
# base's behaviour on a non-finite gradient through as a wrapper would (an inf reaches the params)
optimizer(
    "mechanize",
    _mechanic.mechanize,
    ("Mechanic",),
    {"tx": optimizers.sgd(1.0)},
    f"{OPTAX_CONTRIB}.mechanize",
    sparse="dense",
)
optimizer("cocob", optimizers.cocob, ("COCOB",), {}, f"{OPTAX_CONTRIB}.cocob", sparse="dense")
optimizer("dog", optimizers.dog, ("DoG",), {}, f"{OPTAX_CONTRIB}.dog", sparse="dense")
optimizer("dowg", optimizers.dowg, ("DoWG",), {}, f"{OPTAX_CONTRIB}.dowg", sparse="dense")

for _name, _factory, _example, _reference in (
    ("scale_by_cocob", transforms.scale_by_cocob, {}, f"{OPTAX_CONTRIB}.scale_by_cocob"),
    ("scale_by_prodigy", transforms.scale_by_prodigy, {}, f"{OPTAX_CONTRIB}.prodigy"),
    ("scale_by_dadapt_adamw", transforms.scale_by_dadapt_adamw, {}, f"{OPTAX_CONTRIB}.dadapt_adamw"),
    (
        "scale_by_dog",
        transforms.scale_by_dog,
        {"init_step": ("distance", 0.01)},
        f"{OPTAX_CONTRIB}._dog.scale_by_dog",
    ),
    ("scale_by_dowg", transforms.scale_by_dowg, {}, f"{OPTAX_CONTRIB}._dog.scale_by_dowg"),
    (
        "scale_by_distance_over_gradients",
        transforms.scale_by_distance_over_gradients,
        {},
        "optax.scale_by_distance_over_gradients",
    ),
):
    register(Entry(_name, _factory, "transform", example=_example, reference=_reference, sparse="dense"))


def _loss(step: int) -> dict:
    """The loss `value` Polyak's step size reads: a constant here, large enough that the step is capped."""
    del step
    return {"value": 1e3}


optimizer(
    "polyak_sgd",
    optimizers.polyak_sgd,
    ("PolyakSGD",),
    {"max_learning_rate": 0.5},
    "optax.polyak_sgd",
    sparse="dense",
    extra_args=_loss,
)
register(
    Entry(
        "scale_by_polyak",
        transforms.scale_by_polyak,
        "transform",
        reference="optax.scale_by_polyak",
        sparse="dense",
        extra_args=_loss,
    )
)
