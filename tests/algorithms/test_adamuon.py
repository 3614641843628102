"""gradtx/_algorithms/adamuon.py: AdaMuon against pytorch-optimizer's `AdaMuon` (20 steps on the recorded
gradients, its defaults and three other settings), what its normalisation gives, and its errors."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


@pytest.mark.parametrize("case", _references.cases("adamuon"), ids=repr)
def test_adamuon_equals_pytorch_optimizer(case):
    _references.check_case(case)


def test_adamuon_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("adamuon", "adamuon")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("AdaMuon", maximize=True)


def test_every_matrix_update_has_the_rms_0_2_times_the_rate():
    """The rescaling gives the update the Frobenius norm sqrt(min(m, n)), Moonlight's factor
    0.2 sqrt(max(m, n)): RMS 0.2, whatever the second moment."""
    rng = np.random.default_rng(0)
    params = {"w": jnp.zeros((6, 4)), "k": jnp.zeros((3, 2, 2, 2))}
    tx = gradtx.adamuon(1.0)
    state = tx.init(params)
    for _ in range(3):
        grads = {k: jnp.asarray(rng.standard_normal(p.shape), jnp.float32) for k, p in params.items()}
        u, state = tx.update(grads, state, params)
        for k in params:
            np.testing.assert_allclose(float(jnp.sqrt(jnp.mean(u[k] ** 2))), 0.2, rtol=1e-5)


def test_the_first_step_is_the_sign_of_the_orthogonalised_gradient():
    """At t = 1, v / (1 - b2) = O^2: the division leaves sign(O)."""
    g = jnp.asarray(np.random.default_rng(1).standard_normal((4, 6)), jnp.float32)
    tx = gradtx.adamuon(1.0, use_adjusted_lr=False)
    u = tx.update({"w": g}, tx.init({"w": g}), {"w": g})[0]["w"]
    o = gradtx.scale_by_muon("original", 5, beta=0.0, nesterov=False)
    s = jnp.sign(o.update(g, o.init(g))[0])
    np.testing.assert_allclose(u, -s * 2.0 / float(jnp.linalg.norm(s)), rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"b1": 1.0}, ValueError, "`b1`"),
        ({"b2": -0.1}, ValueError, "`b2`"),
        ({"ns_steps": 0}, ValueError, "`ns_steps`"),
        ({"ns_coeffs": [(1.0, 2.0)]}, ValueError, "`ns_coeffs`"),
        ({"adam_b1": 1.5}, ValueError, "`adam_b1`"),
        ({"adam_weight_decay": -1.0}, ValueError, "`adam_weight_decay`"),
        ({"eps": -1.0}, ValueError, "`eps`"),
        ({"use_adjusted_lr": "yes"}, TypeError, "`use_adjusted_lr`"),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.adamuon(0.02, **kwargs)
