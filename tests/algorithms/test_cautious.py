"""Cautious updates: the wrapper `cautious` around Lion's and torch's Adam directions against
pytorch-optimizer's `cautious=True` (its `Lion`, and `AdEMAMix` with `alpha=0`: AdamW), and the mask's own
numbers."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._algorithms.adam import adam_rule
from gradtx._algorithms.cautious import cautious_mask
from gradtx.combinators._weight_decay import torch_weight_decay
from tests.algorithms import _references


def _gradtx_side(case, *, masked=True):
    """gradtx's optimizer for a recorded case, built explicitly: the reference's weight decay outside the
    cautious direction (`torch_weight_decay`), the direction Lion's or torch's Adam."""
    kw = case.kwargs
    if case.class_name == "Lion":
        b1, b2 = kw.get("betas", (0.9, 0.99))
        rule = gradtx.scale_by_lion(b1, b2)
    else:  # AdEMAMix at alpha = 0: torch's Adam direction
        assert kw["alpha"] == 0.0
        b1, b2, _ = kw.get("betas", (0.9, 0.999, 0.9999))
        rule = adam_rule(b1, b2, kw.get("eps", 1e-8), amsgrad=False)
    return torch_weight_decay(
        gradtx.cautious(rule) if masked else rule,
        kw["lr"],
        kw.get("weight_decay", 0.0),
        decouple=kw.get("weight_decouple", case.class_name == "Lion"),
        fixed=kw.get("fixed_decay", False),
    )


@pytest.mark.parametrize("case", _references.cases("cautious"), ids=repr)
def test_cautious_equals_pytorch_optimizer(case):
    assert case.kwargs["cautious"] is True
    _references.check_case(case, tx=_gradtx_side(case))


@pytest.mark.parametrize("case", _references.cases("cautious"), ids=repr)
def test_the_mask_matters_on_the_recorded_runs(case):
    with pytest.raises(AssertionError):
        _references.check_case(case, tx=_gradtx_side(case, masked=False))


def test_the_mask_keeps_agreeing_signs_and_rescales_by_n_over_kept_plus_one():
    u = jnp.array([1.0, -2.0, 3.0, 4.0, 0.0])
    g = jnp.array([0.5, -1.0, -1.0, 0.0, 1.0])  # agree, agree, disagree, zero, zero
    np.testing.assert_allclose(cautious_mask(u, g), jnp.array([1.0, -2.0, 0.0, 0.0, 0.0]) * 5 / 3)


def test_negated_masks_updates_that_move_along_the_gradient():
    g = jnp.array([1.0, -1.0, 2.0])
    inner = gradtx.sgd(0.5)  # -0.5 g: every element moves against the gradient
    tx = gradtx.cautious(inner, negated=True)
    u, _ = tx.update(g, tx.init(jnp.zeros(3)), jnp.zeros(3))
    np.testing.assert_allclose(u, -0.5 * g * 3 / 4)
    tx = gradtx.cautious(inner)  # read as a direction, every element disagrees
    np.testing.assert_array_equal(tx.update(g, tx.init(jnp.zeros(3)), jnp.zeros(3))[0], jnp.zeros(3))


def test_complex_parameters_are_refused():
    tx = gradtx.cautious(gradtx.sgd(0.1), negated=True)
    g = jnp.array([1.0 + 1.0j])
    with pytest.raises(TypeError, match="is complex"):
        tx.update(g, tx.init(g), g)


def test_refuses_bad_arguments():
    with pytest.raises(TypeError, match="inner"):
        gradtx.cautious(3.0)
    with pytest.raises(TypeError, match="negated"):
        gradtx.cautious(gradtx.scale_by_lion(), negated=1)
