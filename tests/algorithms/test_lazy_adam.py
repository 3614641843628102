"""gradtx/_algorithms/lazy_adam.py: `lazy_adam` (tf.contrib.opt's LazyAdamOptimizer: a row-sparse gradient
moves only its rows' moments) against float64 references of its rule.

Its building block with TF's scalar dtypes is checked with the rest of the Adam family in test_adam.py.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import gradtx
from tests import helpers, reference

CASES = {
    "lazy_adam": (
        lambda: gradtx.lazy_adam(0.05, 0.8, 0.95, 1e-3),
        lambda: reference.adam(0.05, 0.8, 0.95, 1e-3, lazy=True),
        ["m", "v"],
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


@SPARSE
@pytest.mark.parametrize("block, nesterov, lazy", [(gradtx.scale_by_lazy_adam, False, True)], ids=["lazy"])
def test_adam_sparse_variants_match_the_reference(sparse, block, nesterov, lazy):
    tx = gradtx.chain(block(0.8, 0.95, 1e-3), gradtx.scale_by_learning_rate(0.05))
    params, grads = helpers.problem(4, sparse=sparse)
    expected, _ = reference.run(
        reference.adam(0.05, 0.8, 0.95, 1e-3, nesterov=nesterov, lazy=lazy), params, grads
    )
    with jax.enable_x64(True):
        actual, _ = helpers.run(
            tx, [np.asarray(p, np.float64) for p in params], helpers.to_gradtx(grads, dtype=np.float64)
        )
    for a, e in zip(actual, expected, strict=True):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10)
