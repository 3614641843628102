"""tf.clip_by_global_norm and tf.clip_by_norm against TensorFlow, dense and IndexedSlices."""

import numpy as np
import pytest
import tensorflow as tf

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers


def _grads(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((6, 3)).astype(np.float32) * 3, rng.standard_normal(5).astype(np.float32)]


@pytest.mark.parametrize("clip_norm", [0.5, 3.0, 100.0])
def test_clip_by_global_norm_dense(clip_norm):
    grads = _grads(0)
    expected, norm = tf.clip_by_global_norm([tf.constant(g) for g in grads], clip_norm)
    tx = gradtx.clip_by_global_norm(clip_norm)
    out, state = tx.update(grads, tx.init(grads))
    helpers.assert_trees_close(out, [e.numpy() for e in expected], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(state.global_norm, norm.numpy(), rtol=1e-6)


def test_clip_by_global_norm_with_indexed_slices_counts_raw_values():
    values = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    idx = np.array([0, 2, 2, 5])
    slices = tf.IndexedSlices(tf.constant(values), tf.constant(idx), tf.constant([6, 3]))
    dense = _grads(1)[1]
    expected, norm = tf.clip_by_global_norm([slices, tf.constant(dense)], 1.5)
    tx = gradtx.clip_by_global_norm(1.5)
    out, state = tx.update([RowSparse(idx, values, (6, 3)), dense], tx.init(None))
    np.testing.assert_allclose(out[0].values, expected[0].values.numpy(), rtol=1e-6)
    np.testing.assert_allclose(out[1], expected[1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(state.global_norm, norm.numpy(), rtol=1e-6)


@pytest.mark.parametrize("clip_norm", [0.5, 100.0])
def test_clip_by_norm_dense_and_sparse(clip_norm):
    g = _grads(2)[0]
    tx = gradtx.clip_by_norm(clip_norm)
    out, _ = tx.update(g, tx.init(None))
    np.testing.assert_allclose(out, tf.clip_by_norm(tf.constant(g), clip_norm).numpy(), rtol=1e-6)
    idx = np.array([1, 1, 4])
    vals = g[:3]
    expected = tf.clip_by_norm(
        tf.IndexedSlices(tf.constant(vals), tf.constant(idx), tf.constant([6, 3])), clip_norm
    )
    out, _ = tx.update(RowSparse(idx, vals, (6, 3)), ())
    np.testing.assert_allclose(out.values, expected.values.numpy(), rtol=1e-6)


def test_clip_by_value():
    g = _grads(3)[0]
    out, _ = gradtx.clip(0.8).update(g, ())
    np.testing.assert_array_equal(out, tf.clip_by_value(tf.constant(g), -0.8, 0.8).numpy())
