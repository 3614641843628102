"""gradtx/_algorithms/grad_variance.py: scale_by_grad_variance, RETURNN's GradVarianceScaled as a building
block, and the alias `grad_variance_scaled` against the float64 reference of RETURNN's rule.

Here: the block's numbers in float64 (a row-sparse leaf, taken entry by entry as RETURNN does, and a dense
leaf in one tree), the entry-by-entry rule worked out by hand on duplicated indices, the cap of the factor
at 1, the state, and the errors; the alias's numbers against tests/reference_contrib.py in float32 and
float64, dense and row-sparse, and its errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
from gradtx.transforms import ScaleByGradVarianceState, scale_by_grad_variance
from tests import helpers, reference
from tests import reference_contrib as ref

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def test_numbers_match_the_float64_reference_dense_and_row_sparse():
    """RETURNN's rule with lr = 1; sparse: slots decay on every row, each entry reads its row, no dedup."""
    params, grads = _problem()
    expected, ref_slots = reference.run(ref.grad_variance_scaled(1.0, 0.7, 0.8, 1e-3), params, grads)
    with jax.enable_x64(True):
        tx = gradtx.chain(scale_by_grad_variance(0.7, 0.8, 1e-3), gradtx.scale_by_learning_rate(1.0))
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    for slot in ("m", "v"):
        helpers.assert_trees_close(
            gradtx.get_slot(state, slot), [s[slot] for s in ref_slots], rtol=1e-10, atol=1e-10, msg=slot
        )
    assert int(state[0].count) == len(grads)


def test_duplicated_indices_are_taken_entry_by_entry():
    """Row 1 twice (g = 2, then -1), row 2 once, b1 = b2 = 0.5, eps = 0, by hand:
    m = 0.5 m0, then m[1] += 0.5 (2 - 1) -> 1.0, m[2] += 0.25 -> 0.15;
    s = (g - m[row])^2 per entry = [1, 4, 0.1225];
    v = 0.5 v0, then v[1] += 0.5 (1 + 4) -> 2.6, v[2] += 0.06125 -> 0.21125;
    u = g * min(v[row] / s, 1) = [2, -0.65, 0.5]: row 1 gets 1.35 (TF's deduplicated rule would give 1)."""
    tx = scale_by_grad_variance(0.5, 0.5, 0.0)
    state = ScaleByGradVarianceState(
        jnp.int32(0), jnp.array([[0.5], [1.0], [-0.2]]), jnp.array([[0.1], [0.2], [0.3]])
    )
    g = RowSparse(jnp.array([1, 1, 2]), jnp.array([[2.0], [-1.0], [0.5]]), (3, 1))
    u, new = jax.jit(tx.update)(g, state)
    assert isinstance(u, RowSparse)
    np.testing.assert_array_equal(u.indices, [1, 1, 2])
    np.testing.assert_allclose(u.values[:, 0], [2.0, -0.65, 0.5], rtol=1e-6)
    np.testing.assert_allclose(u.todense()[:, 0], [0.0, 1.35, 0.5], rtol=1e-6)
    np.testing.assert_allclose(new.m[:, 0], [0.25, 1.0, 0.15], rtol=1e-6)
    np.testing.assert_allclose(new.v[:, 0], [0.05, 2.6, 0.21125], rtol=1e-6)


def test_the_factor_is_capped_at_one():
    """Where the running variance exceeds the current squared deviation, the gradient passes unchanged."""
    tx = scale_by_grad_variance(0.9, 0.999, 1e-8)
    state = ScaleByGradVarianceState(jnp.int32(3), jnp.zeros(3), jnp.full(3, 100.0))
    g = jnp.array([0.5, -2.0, 3.0])
    u, _ = jax.jit(tx.update)(g, state)
    np.testing.assert_array_equal(u, g)


def test_state_has_returnns_slot_names_starting_at_zero():
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = scale_by_grad_variance().init(params)
    assert type(state) is ScaleByGradVarianceState and state._fields == ("count", "m", "v")
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    helpers.assert_trees_close(state.m, jax.tree.map(np.zeros_like, params), atol=0)
    helpers.assert_trees_close(state.v, jax.tree.map(np.zeros_like, params), atol=0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"b1": 2.0}, r"`scale_by_grad_variance`: `b1` must be in \[0.0, 1.0\], got 2.0\."),
        ({"b2": -0.1}, r"`scale_by_grad_variance`: `b2` must be in \[0.0, 1.0\], got -0.1\."),
        ({"eps": -1.0}, r"`scale_by_grad_variance`: `eps` must be >= 0, got -1.0\."),
        ({"eps": float("inf")}, r"`scale_by_grad_variance`: `eps` must be finite, got inf\."),
    ],
)
def test_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scale_by_grad_variance(**kwargs)


def test_bad_types():
    with pytest.raises(
        TypeError, match=r"`scale_by_grad_variance`: `b1` must be a number, a scalar array or"
    ):
        scale_by_grad_variance(b1="0.9")


# --------------------------------------------------------------------------- the alias against RETURNN's rule

CASES = {
    "grad_variance_scaled": (
        lambda: gradtx.grad_variance_scaled(0.1, 0.8, 0.9, 1e-4),
        lambda: ref.grad_variance_scaled(0.1, 0.8, 0.9, 1e-4),
        ["m", "v"],
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
            gradtx.grad_variance_scaled,
            {"learning_rate": 0.1, "b1": 2.0},
            r"`grad_variance_scaled`: `b1` must be in",
        ),
    ],
)
def test_alias_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
