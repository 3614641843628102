"""gradtx/_algorithms/spam.py and stable_spam.py: SPAM and StableSPAM against pytorch-optimizer's, 20 steps
on the recorded gradients (defaults, momentum resets with their warmup, clipping that bites, the betas' cosine
decay, `gamma1=-1`, weight decay), their arguments and defaults, their errors."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references

CASES = _references.cases("spam")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_spam_and_stable_spam_equal_pytorch_optimizer(case):
    _references.check_case(case)


@pytest.mark.parametrize(
    "label, off",
    [("clip", {"threshold": 0}), ("reset", {"update_proj_gap": 500}), ("stable_t_max", {"t_max": None})],
)
def test_the_cases_exercise_their_mode(label, off):
    """Without the mode a case is meant to test (clipping, resets, the betas' decay), gradtx's trajectory
    leaves the reference's: the recorded cases do reach it within their steps."""
    case = next(c for c in CASES if c.label == label)
    with pytest.raises(AssertionError):
        _references.check_case(case, gradtx.get(case.class_name, **{**case.kwargs, **off}))


def test_spam_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("spam", "spam")
    with pytest.raises(ValueError, match="density=1.0"):
        gradtx.get("SPAM", density=0.5)
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("SPAM", maximize=True)


def test_stable_spam_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("spam", "stable_spam")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("StableSPAM", maximize=True)


def test_spam_clips_a_spike_to_the_threshold():
    """After the first step (no clipping yet), a gradient 100x larger is clipped to sqrt(threshold v)."""
    tx = gradtx.spam(1.0, b1=0.0, b2=0.5, threshold=4.0, grad_accu_steps=2, eps=0.0)
    p = jnp.zeros(1)
    state = tx.update(jnp.ones(1), tx.init(p), p)[1]  # v = 0.5
    state = tx.update(jnp.full(1, 100.0), state, p)[1]
    np.testing.assert_allclose(state.exp_avg, [np.sqrt(4.0 * 0.5)], rtol=1e-6)


def test_spam_resets_its_moments_every_gap_steps():
    tx = gradtx.spam(0.1, update_proj_gap=3)
    p = jnp.zeros(2)
    state = tx.init(p)
    for _ in range(2):
        state = tx.update(jnp.ones(2), state, p)[1]
    assert float(state.exp_avg[0]) > 0.15
    state = tx.update(jnp.ones(2), state, p)[1]  # step 3: the moments restart from 0
    np.testing.assert_allclose(state.exp_avg, 0.1, rtol=1e-6)


def test_stable_spam_skips_a_leaf_with_a_zero_gradient():
    tx = gradtx.stable_spam(0.1)
    p = {"a": jnp.ones(2), "b": jnp.ones(3)}
    state = tx.init(p)
    u, _ = tx.update({"a": jnp.zeros(2), "b": jnp.ones(3)}, state, p)
    np.testing.assert_array_equal(u["a"], 0.0)
    assert bool(jnp.all(u["b"] < 0))


@pytest.mark.parametrize(
    "factory, kwargs, name",
    [
        (gradtx.spam, {"update_proj_gap": 0}, "update_proj_gap"),
        (gradtx.spam, {"warmup_epoch": 1.5}, "warmup_epoch"),
        (gradtx.spam, {"threshold": -1.0}, "threshold"),
        (gradtx.stable_spam, {"gamma1": -0.5}, "gamma1"),
        (gradtx.stable_spam, {"t_max": 0}, "t_max"),
        (gradtx.stable_spam, {"eta_min": 2.0}, "eta_min"),
        (gradtx.stable_spam, {"theta": 1.0}, "theta"),
    ],
)
def test_bad_arguments_are_refused_by_name(factory, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=f"`{name}`"):
        factory(0.1, **kwargs)


def test_gamma1_minus_one_is_b1():
    g, p = jnp.array([0.3, -2.0, 1e-2]), jnp.array([1.0, -1.0, 0.5])
    a, b = gradtx.stable_spam(0.1, b1=0.8, gamma1=-1.0), gradtx.stable_spam(0.1, b1=0.8, gamma1=0.8)
    sa, sb = a.init(p), b.init(p)
    for k in range(3):
        ua, sa = a.update(g * (k + 1), sa, p)
        ub, sb = b.update(g * (k + 1), sb, p)
        np.testing.assert_array_equal(ua, ub)
