"""gradtx/combinators/_clip.py: clip, clip_by_norm, clip_by_global_norm (TF's arithmetic; TF parity in
tests/parity)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse


def test_clip_by_value_and_a_schedule():
    tx = gradtx.clip(lambda count: 1.0 + count)
    state = tx.init(None)
    u1, state = tx.update(jnp.array([-5.0, 0.5, 5.0]), state)
    u2, state = tx.update(jnp.array([-5.0, 0.5, 5.0]), state)
    np.testing.assert_array_equal(u1, [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(u2, [-2.0, 0.5, 2.0])


def test_clip_by_norm_is_per_tensor_and_leaves_zero_tensors_alone():
    tx = gradtx.clip_by_norm(1.0)
    out, _ = tx.update(
        {"big": jnp.array([3.0, 4.0]), "small": jnp.array([0.1, 0.0]), "zero": jnp.zeros(2)}, tx.init(None)
    )
    np.testing.assert_allclose(out["big"], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(out["small"], np.float32([0.1, 0.0]))
    np.testing.assert_array_equal(out["zero"], [0.0, 0.0])


def test_clip_by_global_norm_scales_all_leaves_together_and_records_the_norm():
    tx = gradtx.clip_by_global_norm(2.5)
    g = {"a": jnp.array([3.0]), "b": jnp.array([[4.0]])}
    out, state = jax.jit(tx.update)(g, tx.init(None))
    np.testing.assert_allclose(out["a"], [1.5], rtol=1e-6)
    np.testing.assert_allclose(out["b"], [[2.0]], rtol=1e-6)
    assert float(state.global_norm) == pytest.approx(5.0)
    small, state = tx.update({"a": jnp.array([0.3])}, tx.init(None))
    np.testing.assert_allclose(small["a"], [0.3], rtol=1e-6)


def test_clip_by_global_norm_makes_everything_nan_for_a_non_finite_norm_as_tf():
    tx = gradtx.clip_by_global_norm(1.0)
    out, state = tx.update({"a": jnp.array([jnp.inf]), "b": jnp.array([1.0])}, tx.init(None))
    assert bool(jnp.isnan(out["b"][0])) and bool(jnp.isinf(state.global_norm))


def test_row_sparse_updates_are_measured_by_their_values_as_tf_measures_indexed_slices():
    g = RowSparse(jnp.array([0, 0]), jnp.array([[3.0], [4.0]]), (4, 1))
    out, state = gradtx.clip_by_global_norm(1.0).update({"e": g}, gradtx.clip_by_global_norm(1.0).init(None))
    assert float(state.global_norm) == pytest.approx(5.0)  # not 7, the norm of the summed row
    assert isinstance(out["e"], RowSparse)
    np.testing.assert_allclose(out["e"].values[:, 0], [0.6, 0.8], rtol=1e-6)
    clipped, _ = gradtx.clip_by_norm(1.0).update({"e": g}, ())
    np.testing.assert_allclose(clipped["e"].values[:, 0], [0.6, 0.8], rtol=1e-6)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (gradtx.clip, {"max_delta": -1.0}, ValueError, r"`clip`: `max_delta` must be >= 0, got -1.0"),
        (gradtx.clip_by_norm, {"max_norm": -1.0}, ValueError, r"`clip_by_norm`: `max_norm` must be >= 0"),
        (
            gradtx.clip_by_global_norm,
            {"max_norm": 0.0},
            ValueError,
            r"`clip_by_global_norm`: `max_norm` must be > 0, got 0.0",
        ),
        (
            gradtx.clip_by_global_norm,
            {"max_norm": "1"},
            TypeError,
            r"`clip_by_global_norm`: `max_norm` must be a number",
        ),
    ],
)
def test_clip_errors(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**kwargs)
