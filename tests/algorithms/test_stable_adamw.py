"""StableAdamW against pytorch-optimizer's `StableAdamW`, its RMS divisor and its debiased decays."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._algorithms.stable_adamw import debiased_beta, update_rms
from tests.algorithms import _references


@pytest.mark.parametrize("case", _references.cases("stable_adamw"), ids=repr)
def test_stable_adamw_equals_pytorch_optimizer(case):
    _references.check_case(case)


def test_stable_adamw_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("stable_adamw", "stable_adamw")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("StableAdamW", maximize=True)
    a, b = gradtx.get("StableAdamW", kahan_sum=False), gradtx.get("StableAdamW", kahan_sum=True)
    g, p = jnp.array([0.3, -2.0]), jnp.array([1.0, -1.0])
    np.testing.assert_array_equal(a.update(g, a.init(p), p)[0], b.update(g, b.init(p), p)[0])


def test_the_clipped_run_divides_by_an_rms_above_one():
    case = next(c for c in _references.cases("stable_adamw") if c.label == "clipped")
    b1, b2 = case.kwargs["betas"]
    tx = gradtx.scale_by_stable_adamw(b1, b2)
    state = tx.init({k: jnp.asarray(v) for k, v in case.init.items()})
    above = 0
    for g in case.grads:
        g = {k: jnp.asarray(v) for k, v in g.items()}
        _, state = tx.update(g, state)
        above += sum(float(update_rms(g[k], state.exp_avg_sq[k], 1e-8)) > 1 for k in g)
    assert above > 0


def test_update_rms_is_the_rms_of_g_over_root_v_at_least_one():
    g, v = jnp.array([2.0, 0.0, 3.0]), jnp.array([1.0, 5.0, 0.0])
    np.testing.assert_allclose(update_rms(g, v, 0.5), np.sqrt((4.0 + 0.0 + 9.0 / 0.25) / 3))
    assert float(update_rms(0.1 * g, v + 1.0, 0.5)) == 1.0


@pytest.mark.parametrize("beta", [0.0, 0.5, 0.9, 0.999])
def test_debiased_beta_is_pytorch_optimizers(beta):
    for t in (1, 2, 3, 10, 1000):
        want = 0.0 if beta == 0 else (beta**t - beta) / (beta**t - 1.0)  # debias_beta, in double
        np.testing.assert_allclose(float(debiased_beta(beta, t, jnp.float32)), want, rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(
            float(debiased_beta(jnp.float32(beta), t, jnp.float32)), want, rtol=2e-3, atol=1e-7
        )


def test_refuses_bad_arguments():
    with pytest.raises(ValueError, match="b2"):
        gradtx.stable_adamw(0.1, b2=1.0)
    with pytest.raises(ValueError, match="eps"):
        gradtx.stable_adamw(0.1, eps=-1.0)
    with pytest.raises(TypeError, match="weight_decouple"):
        gradtx.stable_adamw(0.1, weight_decouple=None)
