"""optax_compat's `lookahead` (params `LookaheadParams(fast, slow)`) against `optax.lookahead`: 20 steps."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import optax_compat as compat
from tests import helpers

optax = pytest.importorskip("optax")

SHAPES = {"w": (3, 4), "b": (5,)}


def _problem(steps):
    rng = np.random.default_rng(0)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = {k: jnp.asarray(rng.standard_normal((steps, *s)), jnp.float32) for k, s in SHAPES.items()}
    return params, grads


def _cases(lib):
    """The same lookaheads from `lib` (optax or optax_compat), each with the same fast optimizer."""
    return [
        lib.lookahead(lib.sgd(0.1), sync_period=1, slow_step_size=0.5),
        lib.lookahead(lib.adam(0.05), sync_period=3, slow_step_size=0.3),
        lib.lookahead(lib.sgd(0.1, momentum=0.9), sync_period=4, slow_step_size=0.7, reset_state=True),
        lib.lookahead(lib.adam(0.05), sync_period=5, slow_step_size=1.0, reset_state=True),
    ]


def _trajectories(lib, txs, params, grads):
    """Every transform's params (fast and slow) and state after each step, in one scan."""

    def step(carry, g):
        out = []
        for tx, (p, s) in zip(txs, carry, strict=True):
            u, s = tx.update(g, s, p)
            out.append((lib.apply_updates(p, u), s))
        return out, out

    start = lib.LookaheadParams.init_synced(params)
    return jax.lax.scan(step, [(start, tx.init(start)) for tx in txs], grads)[1]


def _paths(tree):
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def test_twenty_steps_and_states_equal_optax_jitted():
    params, grads = _problem(helpers.STEPS)
    run = jax.jit(lambda p, g: [_trajectories(lib, _cases(lib), p, g) for lib in (compat, optax)])
    ours, theirs = run(params, grads)
    for k, (a, e) in enumerate(zip(ours, theirs, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"case {k}")
        assert _paths(a) == _paths(
            e
        )  # LookaheadParams(fast, slow), LookaheadState(fast_state, steps_since_sync)
    np.testing.assert_array_equal(ours[1][1].steps_since_sync, np.arange(1, helpers.STEPS + 1) % 3)


def test_the_slow_weights_are_gradtx_lookahead_s():
    """gradtx.lookahead keeps the slow weights in its state: the same numbers, the same fast optimizer."""
    params, grads = _problem(5)
    grads = [jax.tree.map(lambda g, t=t: g[t], grads) for t in range(5)]
    ours = compat.lookahead(compat.sgd(0.1, momentum=0.9), 2, 0.3)
    mine = gradtx.lookahead(compat.sgd(0.1, momentum=0.9), 2, 0.3)
    p, q = compat.LookaheadParams.init_synced(params), params
    s, r = ours.init(p), mine.init(q)
    for g in grads:
        u, s = ours.update(g, s, p)
        p = compat.apply_updates(p, u)
        v, r = mine.update(g, r, q)
        q = gradtx.apply_updates(q, v)
    helpers.assert_trees_close(p.fast, q, rtol=1e-6, atol=1e-6)
    helpers.assert_trees_close(p.slow, gradtx.slow_params(r), rtol=1e-6, atol=1e-6)


def test_five_eager_steps_equal_optax_and_init_takes_the_fast_weights_alone():
    params, grads = _problem(5)
    grads = [jax.tree.map(lambda g, t=t: g[t], grads) for t in range(5)]
    out = []
    for lib in (compat, optax):
        tx = lib.lookahead(lib.sgd(0.05, momentum=0.5), sync_period=2, slow_step_size=0.4, reset_state=True)
        p = lib.LookaheadParams.init_synced(params)
        s = tx.init(p)
        for g in grads:
            u, s = tx.update(g, s, p)
            p = lib.apply_updates(p, u)
        out.append((p, s))
    helpers.assert_trees_close(out[0], out[1], rtol=1e-6, atol=1e-6)
    tx = compat.lookahead(compat.adam(0.05), 2, 0.4)
    helpers.assert_trees_close(tx.init(params), tx.init(compat.LookaheadParams.init_synced(params)))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"sync_period": 0}, ValueError, r"`lookahead`: `sync_period` must be >= 1, got 0"),
        ({"slow_step_size": 1.5}, ValueError, r"`lookahead`: `slow_step_size` must be in \[0.0, 1.0\]"),
        ({"reset_state": 1}, TypeError, r"`lookahead`: `reset_state` must be"),
    ],
)
def test_bad_arguments_are_refused_when_built(kwargs, error, match):
    with pytest.raises(error, match=match):
        compat.lookahead(compat.sgd(0.1), **{"sync_period": 2, "slow_step_size": 0.5, **kwargs})


def test_update_needs_the_params():
    tx = compat.lookahead(compat.sgd(0.1), 2, 0.5)
    p = compat.LookaheadParams.init_synced(jnp.zeros(2))
    with pytest.raises(ValueError, match=r"`lookahead`: `update` needs the current parameters"):
        tx.update(jnp.ones(2), tx.init(p))
