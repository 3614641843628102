"""gradtx/_algorithms/adamw.py: `adamw` (tf.contrib.opt's AdamWOptimizer, decoupled weight decay) against the
float64 reference of contrib's rule, its decay mask and its errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers
from tests import reference_contrib as ref

CASES = {
    "adamw": (
        lambda: gradtx.adamw(0.05, weight_decay=0.1, b1=0.8, b2=0.95, eps=1e-3),
        lambda: ref.adamw(0.05, 0.1, 0.8, 0.95, 1e-3),
        [],
        None,
    ),
    "adamw-lr-scaled": (
        lambda: gradtx.adamw(
            0.05, weight_decay=0.1, b1=0.8, b2=0.95, eps=1e-3, scale_decay_by_learning_rate=True
        ),
        lambda: ref.adamw(0.05, 0.1, 0.8, 0.95, 1e-3, scaled=True),
        [],
        None,
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


@SPARSE
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_the_reference(name, sparse, x64):
    make_tx, make_ref, slots, extra = CASES[name]
    helpers.compare_to_reference(
        make_tx, make_ref, sparse=sparse, x64=x64, slots=slots, extra_args=extra, atol32=5e-6
    )


def test_adamw_decays_only_the_masked_params():
    params = {"w": jnp.ones(2), "b": jnp.ones(2)}
    tx = gradtx.adamw(0.1, weight_decay=0.5, mask=["w"])
    out, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    np.testing.assert_allclose(out["w"], [-0.5, -0.5])
    np.testing.assert_array_equal(out["b"], [0.0, 0.0])


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.adamw, {"weight_decay": -0.1}, r"`adamw`: `weight_decay` must be >= 0, got -0.1"),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
