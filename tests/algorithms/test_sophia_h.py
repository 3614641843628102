"""gradtx/_algorithms/sophia_h.py: Sophia-H against pytorch-optimizer's `SophiaH`, 20 steps on the standard
problem with the reference's own Gaussian (or random-sign) probes replayed (tools/references/sophia_h.py);
its clipped first step, the reference's `p` under gradtx's name, how it differs from optax's Sophia, its
errors."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references
from tests.algorithms.test_adahessian import case_loss, hutchinson_replay, largest_difference, with_obj_fn


@pytest.mark.parametrize("case", _references.cases("sophia_h"), ids=repr)
def test_sophia_h_equals_pytorch_optimizer(case):
    _references.check_case(case, extra_args=hutchinson_replay(case))


def test_sophia_h_cases_reach_the_hessian():
    # outside the default (every step clipped), most elements' steps are not clipped at some step: the
    # estimates decide the trajectory, and gradtx's own Gaussian draws miss it
    for case in _references.cases("sophia_h"):
        kw = case.kwargs
        lr, p = kw.get("lr", 0.06), kw.get("p", 0.01)
        if case.label == "default":
            continue
        prev, unclipped = case.init, 0.0
        for params in case.params:
            steps = np.concatenate([(params[k] - prev[k]).ravel() for k in params]) / lr
            unclipped, prev = max(unclipped, float(np.mean(np.abs(steps) < 0.99 * p))), params
        assert unclipped > 0.5, case
    (case,) = [c for c in _references.cases("sophia_h") if c.label == "clip_betas_period1"]
    tx = with_obj_fn(gradtx.get("SophiaH", **case.kwargs), case_loss(case))
    assert largest_difference(_references.replay(tx, case), case) > 1e-3


def test_sophia_h_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("sophia_h", "sophia_h")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("SophiaH", maximize=True)
    params = jnp.array([1.0, -2.0])
    hessian = jnp.array([2.0, 8.0])
    a, b = (
        gradtx.get("SophiaH", lr=0.5, p=3.0, betas=(0.0, 0.0)),
        gradtx.sophia_h(0.5, 0.0, 0.0, clip_threshold=3.0),
    )
    ua = a.update(jnp.array([1.0, -40.0]), a.init(params), params, hessian=hessian)[0]
    ub = b.update(jnp.array([1.0, -40.0]), b.init(params), params, hessian=hessian)[0]
    np.testing.assert_array_equal(ua, ub)
    np.testing.assert_allclose(ua, [-0.25, 1.5])  # -lr clip(g / h, 3)


def test_sophia_h_step_reads_this_refresh_unlike_optax_sophia():
    # Sophia-H averages the estimate in before its step; optax's Sophia (gradtx.sophia) steps on the
    # previous refresh's average (0 at step 1: clipped) and bias-corrects its momentum
    params = jnp.array([1.0, -2.0])
    obj_fn = lambda w: jnp.sum(jnp.array([1.0, 4.0]) * w**2)  # noqa: E731  Hessian diag(2, 8)
    tx = gradtx.scale_by_sophia_h(b1=0.5, b2=0.5, clip_threshold=10.0, hessian_distribution="rademacher")
    u, state = tx.update(jnp.array([1.0, -4.0]), tx.init(params), params, obj_fn=obj_fn)
    np.testing.assert_allclose(u, [0.5 / 1.0, -2.0 / 4.0])  # (0.5 g) / (0.5 diag H)
    np.testing.assert_allclose(state.hessian_moment, [1.0, 4.0])
    optax_sophia = gradtx.scale_by_sophia(b1=0.5, b2=0.5, gamma=1.0, clip_threshold=10.0)
    np.testing.assert_allclose(
        optax_sophia.update(jnp.array([1.0, -4.0]), optax_sophia.init(params), params, obj_fn=obj_fn)[0],
        [10.0, -10.0],  # its average is 0 at step 1: g / eps, clipped
    )


def test_sophia_h_errors():
    tx = gradtx.sophia_h(0.1)
    with pytest.raises(
        gradtx.MissingExtraArgError, match="`sophia_h`: `update` needs the extra argument `obj_fn`"
    ):
        tx.update(jnp.ones(2), tx.init(jnp.ones(2)), jnp.ones(2))
    with pytest.raises(ValueError, match="`sophia_h`: `clip_threshold` must be >= 0"):
        gradtx.sophia_h(0.1, clip_threshold=-1.0)
    with pytest.raises(ValueError, match=r"`scale_by_sophia_h`: `b1` must be in \[0.0, 1.0\)"):
        gradtx.scale_by_sophia_h(b1=1.0)
    with pytest.raises(ValueError, match="`sophia_h`: `hessian_distribution` must be one of"):
        gradtx.sophia_h(0.1, hessian_distribution="uniform")
    with pytest.raises(ValueError, match="`sophia_h`: `num_samples` must be >= 1"):
        gradtx.sophia_h(0.1, num_samples=0)
    with pytest.raises(TypeError, match="`sophia_h`: `update_period` must be an integer"):
        gradtx.sophia_h(0.1, update_period=2.0)
    with pytest.raises(TypeError, match="of real numbers"):
        tx.update(jnp.ones(2, jnp.complex64), tx.init(jnp.ones(2, jnp.complex64)), jnp.ones(2, jnp.complex64),
                  hessian=jnp.ones(2, jnp.complex64))  # fmt: skip
