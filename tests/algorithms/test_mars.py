"""gradtx/_algorithms/mars.py: MARS against pytorch-optimizer's `MARS` (tools/references/mars.py), its
arguments, the modes it refuses, and its building block's pieces."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


@pytest.mark.parametrize("case", _references.cases("mars"), ids=repr)
def test_mars_equals_pytorch_optimizer(case):
    _references.check_case(case)


def test_mars_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("mars", "mars")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("MARS", maximize=True)
    with pytest.raises(ValueError, match="`mars_type` must be one of"):
        gradtx.get("MARS", mars_type="shampoo")


def test_mars_with_optimize_1d_is_scale_by_mars_on_every_leaf():
    params = {"w": jnp.ones((3, 2)), "b": jnp.ones(3)}
    a = gradtx.mars(0.1, optimize_1d=True)
    b = gradtx.chain(gradtx.scale_by_mars(), gradtx.scale_by_learning_rate(0.1))
    sa, sb = a.init(params), b.init(params)
    for k in range(3):
        g = {"w": jnp.full((3, 2), 0.3 * (k + 1)), "b": jnp.array([0.2, -1.0, 4.0]) / (k + 1)}
        ua, sa = a.update(g, sa, params)
        ub, sb = b.update(g, sb, params)
        for key in params:
            np.testing.assert_array_equal(ua[key], ub[key])


def test_the_correction_is_clipped_to_unit_norm_and_remembers_the_gradient():
    tx = gradtx.scale_by_mars(b1=0.5, b2=0.5, gamma=1.0, eps=0.0)
    g1, g2 = jnp.array([[0.15, 0.2]]), jnp.array([[0.6, 0.0]])
    _, state = tx.update(g1, tx.init(g1))
    np.testing.assert_array_equal(state.last_grad, g1)
    np.testing.assert_allclose(state.exp_avg, 0.5 * (2 * g1))  # c = 2 g1 (gamma b1 / (1 - b1) = 1): norm 0.5
    _, state2 = tx.update(g2, state)
    c = g2 + 1.0 * (g2 - g1)  # norm > 1: clipped
    assert np.linalg.norm(c) > 1
    c = c / np.linalg.norm(c)
    np.testing.assert_allclose(state2.exp_avg, 0.5 * state.exp_avg + 0.5 * c, rtol=1e-6)


def test_the_coupled_decay_reaches_only_the_kept_gradient():
    """The reference's `weight_decouple=False`: the step is the undecayed one; the kept gradient decays."""
    params = {"w": jnp.full((2, 2), 2.0), "b": jnp.ones(2)}
    g = {"w": jnp.full((2, 2), 0.5), "b": jnp.ones(2)}
    coupled = gradtx.mars(0.1, weight_decay=0.3, weight_decay_1d=0.3, weight_decouple=False)
    plain = gradtx.mars(0.1, weight_decay=0.0, weight_decay_1d=0.0)
    (uc, sc), (up, _) = (tx.update(g, tx.init(params), params) for tx in (coupled, plain))
    for k in params:
        np.testing.assert_array_equal(uc[k], up[k])
    np.testing.assert_allclose(sc["mars"][0].last_grad["w"], 0.5 + 0.3 * 2.0)
    with pytest.raises(ValueError, match="`mask`"):
        gradtx.mars(0.1, weight_decouple=False, mask={"w": True, "b": False})


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"b1": 1.0}, r"`mars`: `b1` must be in \[0.0, 1.0\)"),
        ({"b2_1d": -0.1}, r"`mars`: `b2_1d` must be in"),
        ({"gamma": -1.0}, r"`mars`: `gamma` must be >= 0"),
        ({"weight_decay_1d": -1.0}, r"`mars`: `weight_decay_1d` must be >= 0"),
        ({"learning_rate_1d": -1.0}, r"`mars`: `learning_rate_1d` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gradtx.mars(0.1, **kwargs)
