"""gradtx/_algorithms/normuon.py: NorMuon against pytorch-optimizer's `NorMuon` (20 steps on the recorded
gradients, its defaults and five other settings, both update scales), its routing of leaves to Muon or AdamW,
what the row normalisation does, and its errors."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


@pytest.mark.parametrize("case", _references.cases("normuon"), ids=repr)
def test_normuon_equals_pytorch_optimizer(case):
    _references.check_case(case)


def test_normuon_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("normuon", "normuon")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("NorMuon", maximize=True)


def test_match_rms_gives_every_matrix_update_the_rms_0_2_times_the_rate():
    rng = np.random.default_rng(0)
    params = {"w": jnp.zeros((6, 4)), "k": jnp.zeros((3, 2, 2, 2))}
    tx = gradtx.normuon(1.0, update_scale="match_rms")
    state = tx.init(params)
    for _ in range(3):
        grads = {k: jnp.asarray(rng.standard_normal(p.shape), jnp.float32) for k, p in params.items()}
        u, state = tx.update(grads, state, params)
        for k in params:
            np.testing.assert_allclose(float(jnp.sqrt(jnp.mean(u[k] ** 2))), 0.2, rtol=1e-5)


def test_preserve_norm_keeps_the_orthogonalised_norm_and_evens_the_rows():
    """With b2 = 0 the second moment is this step's row mean square: every row of the update gets the same
    norm, and the whole keeps the Frobenius norm of the orthogonalised momentum (sqrt(min(m, n)): U V^T)."""
    g = jnp.asarray(np.random.default_rng(1).standard_normal((5, 8)) * np.arange(1, 6)[:, None], jnp.float32)
    tx = gradtx.normuon(1.0, b2=0.0, nesterov=False, ns_coeffs=((1.5, -0.5, 0.0),), ns_steps=60)
    u = tx.update({"w": g}, tx.init({"w": g}), {"w": g})[0]["w"]
    rows = np.linalg.norm(np.asarray(u), axis=1)
    np.testing.assert_allclose(rows, rows[0], rtol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(u)), np.sqrt(5.0), rtol=1e-4)  # ||U V^T||_F


def test_use_muon_routes_leaves_as_the_reference_groups_do():
    params = {"w": jnp.zeros((4, 3)), "b": jnp.zeros(3)}
    grads = {"w": jnp.ones((4, 3)), "b": jnp.ones(3)}
    default = gradtx.normuon(0.1)
    assert default.init(params)["muon"][0].momentum["b"] is None
    all_adamw = gradtx.normuon(0.1, use_muon={"w": False, "b": False})
    u, _ = all_adamw.update(grads, all_adamw.init(params), params)
    np.testing.assert_allclose(u["w"], -3e-4 * jnp.ones((4, 3)), rtol=1e-5)  # AdamW's first step: -lr sign(g)
    by_function = gradtx.normuon(0.1, use_muon=lambda p: {"w": True, "b": False})
    np.testing.assert_array_equal(
        by_function.update(grads, by_function.init(params), params)[0]["w"],
        default.update(grads, default.init(params), params)[0]["w"],
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"beta": 1.0}, ValueError, "`beta`"),
        ({"b2": -0.1}, ValueError, "`b2`"),
        ({"ns_steps": 0}, ValueError, "`ns_steps`"),
        ({"ns_coeffs": "cubic"}, ValueError, "`ns_coeffs` must be one of"),
        ({"update_scale": "rms"}, ValueError, "`update_scale` must be one of"),
        ({"adam_b2": 1.5}, ValueError, "`adam_b2`"),
        ({"adam_eps": -1.0}, ValueError, "`adam_eps`"),
        ({"weight_decay": -1.0}, ValueError, "`weight_decay`"),
        ({"use_muon": {"w": 1}}, TypeError, "`use_muon`"),
        ({"nesterov": 1}, TypeError, "`nesterov`"),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.normuon(0.02, **kwargs)
