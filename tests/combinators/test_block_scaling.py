"""gradtx/combinators/_block_scaling.py: clip_by_block_rms and scale_by_param_block_rms (blocks of optax's
Adafactor) against optax's, 20 steps on the same gradients (scale_by_param_block_norm against optax's:
test_optax_transforms.py)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import helpers

SHAPES = {"w": (6, 4), "conv": (3, 2, 5), "b": (4,)}


def _problem(seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()} for _ in range(steps)
    ]
    return params, grads


CASES = {
    "block-rms-clip-and-scale": (
        lambda: gradtx.chain(
            gradtx.clip_by_block_rms(0.5), gradtx.scale_by_param_block_rms(0.3), gradtx.scale(-0.1)
        ),
        lambda: optax.chain(
            optax.clip_by_block_rms(0.5), optax.scale_by_param_block_rms(0.3), optax.scale(-0.1)
        ),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax(name):
    ours, theirs = CASES[name]
    params, grads = _problem()
    actual, _ = helpers.run(ours(), params, grads)
    expected, _ = helpers.run(theirs(), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")
