"""gradtx/_algorithms/neural_optimizer1.py: `scale_by_neural_optimizer1` (RETURNN's NeuralOptimizer1): its
numbers in float64 (dense and row-sparse), its entry-by-entry rule on duplicated rows worked out by hand,
sign(0), its state and errors; the alias `neural_optimizer1` against the float64 reference of RETURNN's
rule in float32 and float64, and its errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
from gradtx.transforms import (
    ScaleByNeuralOptimizer1State,
    scale_by_neural_optimizer1,
)
from tests import helpers, reference, reference_contrib
from tests import reference_contrib as ref


def test_neural_optimizer1_matches_the_float64_reference_dense_and_row_sparse():
    """RETURNN's rule with lr = 1 on a (6, 3) table (row-sparse, duplicated rows) and a dense (5,) vector."""
    shapes, rows = [(6, 3), (5,)], [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4]]
    params, dense = helpers.problem(5, shapes=shapes, steps=len(rows))
    grads = [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(rows, dense, strict=True)]
    expected, ref_slots = reference.run(reference_contrib.neural_optimizer1(1.0, 0.6, 0.2), params, grads)
    with jax.enable_x64(True):
        tx = gradtx.chain(scale_by_neural_optimizer1(0.6, 0.2), gradtx.scale_by_learning_rate(1.0))
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, shapes, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    helpers.assert_trees_close(
        gradtx.get_slot(state, "m"), [s["m"] for s in ref_slots], rtol=1e-10, atol=1e-10
    )


def test_neural_optimizer1_takes_duplicated_rows_entry_by_entry():
    """Row 1 twice (g = 2, then -0.5), row 0 once, b1 = 0.5, d = 0.1, by hand: m = 0.5 m0, then
    m[1] += 0.5 (2 - 0.5) -> 0.25 and m[0] += -0.1 -> -0.05 (row 2 only decays); each entry compares
    its sign with its row's m: u = [2, -0.05, -0.2], so row 1 gets 1.95 (TF's deduplicated rule: 1.5)."""
    tx = scale_by_neural_optimizer1(b1=0.5, decrease_factor=0.1)
    state = ScaleByNeuralOptimizer1State(jnp.int32(0), jnp.array([[0.1], [-1.0], [0.3]]))
    g = RowSparse(jnp.array([1, 1, 0]), jnp.array([[2.0], [-0.5], [-0.2]]), (3, 1))
    u, new = jax.jit(tx.update)(g, state)
    np.testing.assert_array_equal(u.indices, [1, 1, 0])
    np.testing.assert_allclose(u.values[:, 0], [2.0, -0.05, -0.2], rtol=1e-6)
    np.testing.assert_allclose(u.todense()[:, 0], [-0.2, 1.95, 0.0], rtol=1e-6)
    np.testing.assert_allclose(new.m[:, 0], [-0.05, 0.25, 0.15], rtol=1e-6)


def test_neural_optimizer1_a_zero_mean_disagrees_and_the_state_starts_at_zero():
    """With b1 = 1 the mean stays 0, and sign(0) = 0 differs from sign(g): every step is d * g."""
    tx = scale_by_neural_optimizer1(b1=1.0, decrease_factor=0.25)
    state = tx.init({"w": jnp.zeros((2, 2))})
    assert type(state) is ScaleByNeuralOptimizer1State and state._fields == ("count", "m")
    np.testing.assert_array_equal(state.m["w"], np.zeros((2, 2)))
    u, state = jax.jit(tx.update)({"w": jnp.array([[1.0, -2.0], [0.5, 4.0]])}, state)
    np.testing.assert_array_equal(u["w"], [[0.25, -0.5], [0.125, 1.0]])
    np.testing.assert_array_equal(state.m["w"], np.zeros((2, 2)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"b1": 1.5}, r"`scale_by_neural_optimizer1`: `b1` must be in \[0.0, 1.0\], got 1.5\."),
        (
            {"decrease_factor": -1.0},
            r"`scale_by_neural_optimizer1`: `decrease_factor` must be >= 0, got -1.0\.",
        ),
        (
            {"decrease_factor": float("inf")},
            r"`scale_by_neural_optimizer1`: `decrease_factor` must be finite, got inf\.",
        ),
    ],
)
def test_neural_optimizer1_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scale_by_neural_optimizer1(**kwargs)


# --------------------------------------------------------------------------- the alias against RETURNN's rule

CASES = {
    "neural_optimizer1": (
        lambda: gradtx.neural_optimizer1(0.1, 0.8, 0.2),
        lambda: ref.neural_optimizer1(0.1, 0.8, 0.2),
        ["m"],
    ),
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_returnns_rule(name, sparse, x64):
    make_tx, make_ref, slots = CASES[name]
    helpers.compare_to_reference(make_tx, make_ref, sparse=sparse, x64=x64, slots=slots)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.neural_optimizer1,
            {"learning_rate": 0.1, "decrease_factor": -1.0},
            r"`neural_optimizer1`: `decrease_factor` must be >= 0",
        ),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
