"""gradtx/combinators/_moving_average.py: exponential moving averages of the params (TF's rule)."""

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers


def _reference(params, grads_seq, lr, decay, num_updates):
    avg = [np.asarray(p, np.float64) for p in params]
    ps = [np.asarray(p, np.float64) for p in params]
    for t, grads in enumerate(grads_seq, start=1):
        ps = [p - lr * np.asarray(g, np.float64) for p, g in zip(ps, grads, strict=True)]
        d = min(decay, (1 + t) / (10 + t)) if num_updates else decay
        avg = [a - (a - p) * (1 - d) for a, p in zip(avg, ps, strict=True)]
    return ps, avg


@pytest.mark.parametrize("num_updates", [False, True])
def test_averages_follow_tfs_rule(num_updates):
    params, grads = helpers.problem(0)
    tx = gradtx.moving_average(gradtx.sgd(0.1), 0.9, num_updates=num_updates)
    actual, state = helpers.run(tx, params, grads)
    ps, avg = _reference(params, grads, 0.1, 0.9, num_updates)
    helpers.assert_trees_close(actual[-1], ps, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(gradtx.averaged_params(state), avg, rtol=1e-5, atol=1e-6)


def test_swap_averaged_is_the_swapping_saver_and_swaps_back():
    params = {"w": jnp.zeros(2)}
    tx = gradtx.chain(gradtx.clip_by_global_norm(10.0), gradtx.moving_average(gradtx.sgd(1.0), 0.5))
    u, state = tx.update({"w": jnp.array([-2.0, 2.0])}, tx.init(params), params)
    params = gradtx.apply_updates(params, u)
    eval_params, swapped = gradtx.swap_averaged(params, state)
    np.testing.assert_allclose(eval_params["w"], [1.0, -1.0])
    np.testing.assert_allclose(gradtx.averaged_params(swapped)["w"], [2.0, -2.0])
    back, restored = gradtx.swap_averaged(eval_params, swapped)
    helpers.assert_trees_close(back, params, rtol=0, atol=0)
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)


def test_moving_average_errors():
    with pytest.raises(
        ValueError, match=r"`moving_average`: `average_decay` must be in \[0.0, 1.0\], got 1.5"
    ):
        gradtx.moving_average(gradtx.sgd(0.1), 1.5)
    with pytest.raises(ValueError, match=r"`averaged_params`: the state holds no `moving_average` state"):
        gradtx.averaged_params(gradtx.sgd(0.1).init(jnp.zeros(1)))
    with pytest.raises(ValueError, match=r"`moving_average`: `update` needs the current parameters"):
        tx = gradtx.moving_average(gradtx.sgd(0.1))
        tx.update(jnp.ones(1), tx.init(jnp.ones(1)))
