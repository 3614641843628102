"""FAdam against pytorch-optimizer's `FAdam`: its RMS caps, its adaptive stabilizer, its dtypes."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


def _case(label):
    return next(c for c in _references.cases("fadam") if c.label == label)


@pytest.mark.parametrize("case", _references.cases("fadam"), ids=repr)
def test_fadam_equals_pytorch_optimizer(case):
    _references.check_case(case)


@pytest.mark.parametrize(
    ("label", "change"), [("adaptive_eps", {"eps_2": 0.0}), ("betas_clip", {"clip": 1e6})]
)
def test_the_adaptive_stabilizer_and_the_cap_act_on_the_recorded_runs(label, change):
    case = _case(label)
    with pytest.raises(AssertionError):
        _references.check_case(case, tx=gradtx.get("FAdam", **{**case.kwargs, **change}))


def test_fadam_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("fadam", "fadam")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("FAdam", maximize=True)
    p = jnp.zeros(3, jnp.bfloat16)
    state = gradtx.get("FAdam").init(p)
    assert state[0].momentum.dtype == state[0].fim.dtype == jnp.float32  # the reference's defaults
    state = gradtx.get("FAdam", momentum_dtype="torch.bfloat16", fim_dtype="torch.float16").init(p)
    assert state[0].momentum.dtype == jnp.bfloat16 and state[0].fim.dtype == jnp.float16
    with pytest.raises(ValueError, match="momentum_dtype"):
        gradtx.get("FAdam", momentum_dtype="torch.int8")


def test_the_first_step_is_the_capped_sign_and_the_decay_is_preconditioned():
    g, w = jnp.array([2.0, -0.5]), jnp.array([4.0, 1.0])
    tx = gradtx.scale_by_fadam(b1=0.5, weight_decay=0.1)
    u, state = tx.update(g, tx.init(w), w)
    # F = g^2, base = |g| (+1e-8): natural gradient sign(g) (rms 1, not capped), m = 0.5 sign(g);
    # decay w / |g| = [2, 2] (rms 2) capped to [1, 1]
    np.testing.assert_allclose(u, 0.5 * jnp.sign(g) + 0.1 * jnp.ones(2), rtol=1e-6)
    np.testing.assert_allclose(state.fim, g * g)


def test_refuses_bad_arguments():
    with pytest.raises(ValueError, match="clip"):
        gradtx.fadam(0.1, clip=0.0)
    with pytest.raises(ValueError, match="`p`"):
        gradtx.fadam(0.1, p=-1.0)
    with pytest.raises(ValueError, match="eps_2"):
        gradtx.fadam(0.1, eps_2=-1.0)
    with pytest.raises(TypeError, match="fim_dtype"):
        gradtx.fadam(0.1, fim_dtype=jnp.int32)
