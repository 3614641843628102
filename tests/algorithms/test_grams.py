"""Grams against pytorch-optimizer's `Grams`; its direction takes the gradient's signs."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


@pytest.mark.parametrize("case", _references.cases("grams"), ids=repr)
def test_grams_equals_pytorch_optimizer(case):
    _references.check_case(case)


def test_grams_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("grams", "grams")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("Grams", maximize=True)


def test_the_references_coupled_decay_decays_nothing():
    case = next(c for c in _references.cases("grams") if c.label == "coupled")
    _references.check_case(case, tx=gradtx.get("Grams", **{**case.kwargs, "weight_decay": 0.0}))
    with pytest.raises(AssertionError):  # decoupled, the same decay shows
        _references.check_case(case, tx=gradtx.get("Grams", **{**case.kwargs, "weight_decouple": True}))


def test_the_step_has_the_gradients_sign_and_adams_size():
    grads = [jnp.array([2.0, -1.0, 0.5]), jnp.array([-0.1, -1.0, 0.0])]
    grams, adam = gradtx.scale_by_grams(), gradtx.scale_by_bias_corrected_adam(eps=1e-6)
    sg, sa = grams.init(grads[0]), adam.init(grads[0])
    for g in grads:
        ug, sg = grams.update(g, sg)
        ua, sa = adam.update(g, sa)
    # Grams debiases in double, as torch does; the optax-form Adam in float32, where 1 - 0.999**2
    # is 1.3e-5 off (how far depends on jax's float32 power): the sizes agree to that much.
    np.testing.assert_allclose(ug, jnp.abs(ua) * jnp.sign(grads[-1]), rtol=3e-5)
    assert float(ug[2]) == 0.0 and float(ua[2]) != 0.0


def test_refuses_bad_arguments():
    with pytest.raises(ValueError, match="b2"):
        gradtx.grams(0.1, b2=-0.1)
    with pytest.raises(ValueError, match="eps"):
        gradtx.grams(0.1, eps=-1.0)
    with pytest.raises(TypeError, match="weight_decouple"):
        gradtx.grams(0.1, weight_decouple=0)
