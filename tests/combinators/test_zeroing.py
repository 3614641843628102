"""gradtx/combinators/_zeroing.py: set_to_zero, zero_nans, keep_params_nonnegative against optax's."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.sparse import RowSparse

NAN, INF = float("nan"), float("inf")
PARAMS = {"a": jnp.array([0.5, -1.0, 2.0, 0.0]), "b": jnp.array([[3.0, 0.25]])}
GRADS = {"a": jnp.array([NAN, 1.0, -3.0, -0.5]), "b": jnp.array([[-1.0, INF]])}


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (gradtx.set_to_zero, optax.set_to_zero),
        (gradtx.zero_nans, optax.zero_nans),
        (gradtx.keep_params_nonnegative, optax.keep_params_nonnegative),
    ],
    ids=["set_to_zero", "zero_nans", "keep_params_nonnegative"],
)
def test_matches_optax_and_is_element_wise(ours, theirs):
    tx, ref = ours(), theirs()
    assert isinstance(tx, gradtx.ElementWise)
    out, state = jax.jit(tx.update)(GRADS, tx.init(PARAMS), PARAMS)
    expected, ref_state = ref.update(GRADS, ref.init(PARAMS), PARAMS)
    for a, e in zip(jax.tree.leaves(out), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(a, e)
    if ours is gradtx.zero_nans:
        assert (
            jax.tree.map(bool, state.found_nan)
            == jax.tree.map(bool, ref_state.found_nan)
            == {
                "a": True,
                "b": False,
            }
        )


def test_keep_params_nonnegative_stops_at_zero_and_lifts_negative_params():
    tx = gradtx.chain(gradtx.sgd(1.0), gradtx.keep_params_nonnegative())
    new = gradtx.apply_updates(
        PARAMS, tx.update({"a": jnp.ones(4), "b": jnp.ones((1, 2))}, tx.init(PARAMS), PARAMS)[0]
    )
    np.testing.assert_array_equal(new["a"], [0.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(new["b"], [[2.0, 0.0]])
    with pytest.raises(ValueError, match=r"`keep_params_nonnegative`: `update` needs the current parameters"):
        gradtx.keep_params_nonnegative().update(GRADS, gradtx.EmptyState())


def test_row_sparse_updates():
    g = RowSparse(jnp.array([0, 2, 2]), jnp.array([[NAN], [-1.0], [-1.5]]), (3, 1))
    table = jnp.array([[1.0], [1.0], [2.0]])
    zeroed, _ = gradtx.set_to_zero().update(g, gradtx.EmptyState())
    assert isinstance(zeroed, RowSparse) and not np.any(zeroed.values)
    cleaned, state = gradtx.zero_nans().update(g, gradtx.zero_nans().init(table))
    np.testing.assert_array_equal(cleaned.todense()[:, 0], [0.0, 0.0, -2.5])
    assert bool(state.found_nan)
    tx = gradtx.keep_params_nonnegative()
    kept, _ = tx.update(cleaned, tx.init(table), table)  # the duplicates summed first: -2.5 is bounded at -2
    np.testing.assert_array_equal(kept[:, 0], [0.0, 0.0, -2.0])
