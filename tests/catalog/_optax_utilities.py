"""optax's small utilities that are transforms (`apply_every`): optax's numbers (`Entry.reference`).

optax's numerics (`gradtx.numerics`) and linear algebra (`gradtx.linalg`) are functions of
arrays, not transforms, and are not registered.
"""

from __future__ import annotations

from gradtx import combinators
from tests.catalog._entries import Entry, register

register(
    Entry(
        "apply_every",
        combinators.apply_every,
        "transform",
        example={"k": 2},
        reference="optax.apply_every",
        sparse="dense",  # densified: every row is summed into the accumulator
    )
)
