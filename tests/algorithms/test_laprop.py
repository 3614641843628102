"""LaProp against pytorch-optimizer's `LaProp`: its modes (centered, AMSBound, cautious), its weight decay
after the step, the learning rate inside the momentum."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


@pytest.mark.parametrize("case", _references.cases("laprop"), ids=repr)
def test_laprop_equals_pytorch_optimizer(case):
    _references.check_case(case)


@pytest.mark.parametrize("mode", ["centered", "ams_bound", "cautious", "fixed_decay"])
def test_each_recorded_mode_matters(mode):
    case = next(c for c in _references.cases("laprop") if c.label == mode)
    with pytest.raises(AssertionError):
        _references.check_case(case, tx=gradtx.get("LaProp", **{**case.kwargs, mode: False}))


def test_the_references_coupled_decay_decays_nothing():
    case = next(c for c in _references.cases("laprop") if c.label == "coupled")
    _references.check_case(case, tx=gradtx.get("LaProp", **{**case.kwargs, "weight_decay": 0.0}))


def test_laprop_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("laprop", "laprop")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("LaProp", maximize=True)


def test_the_rate_is_inside_the_momentum():
    """A rate that changes: the momentum holds the rates it was given, divided by their average."""
    g, p = jnp.array([1.0, -2.0]), jnp.zeros(2)
    rates = [0.1, 0.3]
    tx = gradtx.laprop(lambda count: jnp.asarray(rates)[count], b1=0.5, b2=0.5, eps=0.0)
    state = tx.init(p)
    for _ in rates:
        u, state = tx.update(g, state, p)
    # normalized gradients: sign(g) at both steps; m = 0.5 (0.5 0.1) + 0.5 0.3 = 0.175, mean rate 0.175
    np.testing.assert_allclose(u, -0.3 * jnp.sign(g), rtol=1e-6)
    np.testing.assert_allclose(state.exp_avg_lr_1, 0.175, rtol=1e-6)
    const = gradtx.laprop(lambda count: 0.1)
    plain = gradtx.laprop(0.1)
    np.testing.assert_allclose(
        const.update(g, const.init(p), p)[0], plain.update(g, plain.init(p), p)[0], rtol=1e-7
    )


def test_refuses_bad_arguments():
    with pytest.raises(ValueError, match="b1"):
        gradtx.laprop(0.1, b1=1.0)
    with pytest.raises(ValueError, match="steps_before_using_centered"):
        gradtx.laprop(0.1, steps_before_using_centered=-1)
    with pytest.raises(TypeError, match="ams_bound"):
        gradtx.laprop(0.1, ams_bound="yes")
