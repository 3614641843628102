"""Transforms whose state follows the loss: `reduce_on_plateau` (optax's contrib) and `loss_scaled` (TF1's).

`reduce_on_plateau` reads the loss as the extra argument `value`; the example feeds a loss
that stops improving after the first step, so its scale drops during the contract runs. Its
float arguments (`factor`, `rtol`, `atol`, `min_scale`) are not schedules (the rule keeps no
step count, as optax's), so the example gives only ints.

`loss_scaled`'s example starts its dynamic scale at 1, the floor a non-finite step cannot go
below, and keeps the default increment period (2000 steps): the scale stays 1 in the registry
suites' short runs, so a skipped step leaves the later steps as in a run without it (in
training, the gradients of the next step are scaled by the new scale and unscaled by it too).
tests/combinators/test_loss_scale.py and tests/parity/test_loss_scale_tf.py change the scale.
"""

from __future__ import annotations

import jax.numpy as jnp

from gradtx import combinators, optimizers
from tests.catalog._entries import Entry, register


def _plateau_loss(step) -> dict:
    """`reduce_on_plateau`'s extra argument in the examples: a loss that improves once, then plateaus (the
    step may be traced)."""
    return {"value": jnp.where(jnp.asarray(step) == 0, 2.0, 1.0)}


register(
    Entry(
        "reduce_on_plateau",
        combinators.reduce_on_plateau,
        "transform",
        example={"patience": 2, "cooldown": 1},
        reference="optax.contrib.reduce_on_plateau",
        extra_args=_plateau_loss,
    )
)

register(
    Entry(
        "loss_scaled",
        combinators.loss_scaled,
        "wrapper",
        aliases=("MixedPrecisionLossScaleOptimizer",),
        example={"tx": optimizers.momentum(0.05, 0.9), "loss_scale": "dynamic", "initial_loss_scale": 1.0},
        reference="tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer",
        nonfinite="skipped",
    )
)
