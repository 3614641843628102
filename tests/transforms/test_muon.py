"""Muon's building blocks (gradtx/transforms/_muon.py) against their definitions: the Newton-Schulz
iteration orthogonalises (U V^T from NumPy's SVD), other leaves get the bias-corrected momentum, and
`scale_by_shape` scales by the matrix's shape. (The chain's numbers against optax's: tests/optimizers.)"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx

CUBIC = (1.5, -0.5, 0.0)  # the classic Newton-Schulz step, which converges to U V^T


@pytest.mark.parametrize("shape", [(4, 7), (7, 4), (5, 5)])
def test_newton_schulz_with_the_cubic_converges_to_the_polar_factor(shape):
    g = np.random.default_rng(sum(shape)).standard_normal(shape)
    u, _, vt = np.linalg.svd(g, full_matrices=False)
    tx = gradtx.scale_by_muon(CUBIC, ns_steps=60, beta=0.0, nesterov=False)
    out, _ = tx.update(jnp.asarray(g, jnp.float32), tx.init(jnp.zeros(shape)))
    np.testing.assert_allclose(out, u @ vt, atol=2e-4)


def test_the_default_quintic_puts_every_singular_value_near_one():
    g = np.random.default_rng(0).standard_normal((16, 32)) * np.logspace(-0.5, 0.5, 16)[:, None]  # 10x spread
    tx = gradtx.scale_by_muon(beta=0.0, nesterov=False)
    out, _ = tx.update(jnp.asarray(g, jnp.float32), tx.init(jnp.zeros(g.shape)))
    singular = np.linalg.svd(np.asarray(out, np.float64), compute_uv=False)
    assert 0.6 < singular.min() and singular.max() < 1.25, singular


def test_leaves_that_are_not_matrices_get_the_bias_corrected_nesterov_momentum():
    beta, grads = 0.8, [np.array([1.0, -2.0]), np.array([0.5, 4.0])]
    tx = gradtx.scale_by_muon(beta=beta)
    state = tx.init(jnp.zeros(2))
    m = np.zeros(2)
    for t, g in enumerate(grads, start=1):
        out, state = tx.update(jnp.asarray(g, jnp.float32), state)
        m = beta * m + (1 - beta) * g
        expected = beta * m / (1 - beta ** (t + 1)) + (1 - beta) * g / (1 - beta**t)
        np.testing.assert_allclose(out, expected, rtol=1e-6)
        np.testing.assert_allclose(state.momentum, m, rtol=1e-6)


@pytest.mark.parametrize(
    "consistent_rms, shape, factor",
    [(None, (2, 8), 2.0), (None, (8, 2), 1.0), (0.2, (4, 9), 0.6)],
)
def test_scale_by_shape(consistent_rms, shape, factor):
    tx = gradtx.scale_by_shape(consistent_rms)
    out, _ = tx.update({"w": jnp.ones(shape), "b": jnp.ones(3)}, tx.init(None))
    np.testing.assert_allclose(out["w"], factor * np.ones(shape), rtol=1e-6)
    np.testing.assert_array_equal(out["b"], np.ones(3))  # not a matrix: unchanged


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"ns_coeffs": ((1.0, 2.0, 3.0), (1.0, 2.0))},
            ValueError,
            r"`scale_by_muon`: `ns_coeffs` must be three",
        ),
        ({"ns_coeffs": (1.0, float("inf"), 0.0)}, ValueError, r"`ns_coeffs` must be three finite numbers"),
        ({"ns_steps": 2.0}, TypeError, r"`scale_by_muon`: `ns_steps` must be an integer"),
        ({"eps": -1.0}, ValueError, r"`scale_by_muon`: `eps` must be >= 0"),
        ({"adaptive": "yes"}, TypeError, r"`scale_by_muon`: `adaptive` must be True or False"),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.scale_by_muon(**kwargs)


def test_scale_by_shape_refuses_a_schedule_or_a_non_positive_rms():
    with pytest.raises(TypeError, match=r"`scale_by_shape`: `consistent_rms` must be a number"):
        gradtx.scale_by_shape(lambda count: 0.2)
    with pytest.raises(ValueError, match=r"`scale_by_shape`: `consistent_rms` must be > 0"):
        gradtx.scale_by_shape(-0.2)
