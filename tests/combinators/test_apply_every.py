"""`apply_every` (gradtx/combinators/_apply_every.py) and optax_compat's against optax's: 20 steps."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import optax_compat as compat
from tests import helpers

optax = pytest.importorskip("optax")

SHAPES = {"w": (3, 4), "b": (5,), "s": ()}


def _problem(steps):
    rng = np.random.default_rng(0)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = {k: jnp.asarray(rng.standard_normal((steps, *s)), jnp.float32) for k, s in SHAPES.items()}
    return params, grads


def _cases(lib):
    """The same optimizers from `lib` (optax or optax_compat): apply_every alone and inside a chain."""
    return [lib.apply_every(k) for k in (1, 2, 3, 7)] + [
        lib.chain(lib.trace(0.9), lib.apply_every(3), lib.scale(-0.1)),
    ]


def _trajectories(txs, params, grads):
    """Every transform's params and state after each step, in one scan (one compiled program)."""

    def step(carry, g):
        out = []
        for tx, (p, s) in zip(txs, carry, strict=True):
            u, s = tx.update(g, s, p)
            out.append((optax.apply_updates(p, u), s))
        return out, out

    init = [(params, tx.init(params)) for tx in txs]
    return jax.lax.scan(step, init, grads)[1]


def test_twenty_steps_and_states_equal_optax_jitted():
    params, grads = _problem(helpers.STEPS)
    run = jax.jit(lambda p, g: [_trajectories(_cases(lib), p, g) for lib in (compat, optax)])
    ours, theirs = run(params, grads)
    for k, (a, e) in enumerate(zip(ours, theirs, strict=True)):  # params and optax's state layout
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"case {k}")
        paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(a)[0]]
        assert paths == [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(e)[0]]
    # gradtx.apply_every: the same updates; its count is every update, optax's that modulo k
    mine = jax.jit(lambda p, g: _trajectories([gradtx.apply_every(3)], p, g))(params, grads)[0]
    helpers.assert_trees_close(mine[0], theirs[2][0], rtol=1e-6, atol=1e-6, msg="gradtx.apply_every")
    np.testing.assert_array_equal(mine[1].count % 3, theirs[2][1].count)
    np.testing.assert_array_equal(mine[1].count, np.arange(1, helpers.STEPS + 1))
    helpers.assert_trees_close(mine[1].grad_acc, theirs[2][1].grad_acc, rtol=1e-6, atol=1e-6)


def test_five_eager_steps_equal_optax():
    params, grads = _problem(5)
    grads = [jax.tree.map(lambda g, t=t: g[t], grads) for t in range(5)]
    actual, state = helpers.run(compat.apply_every(2), params, grads)
    expected, optax_state = helpers.run(optax.apply_every(2), params, grads)
    helpers.assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6)
    helpers.assert_trees_close(state, optax_state, rtol=1e-6, atol=1e-6)
    assert type(state).__name__ == "ApplyEvery" and int(state.count) == int(optax_state.count) == 1
    assert state._fields == optax_state._fields


def test_it_sums_k_updates_and_emits_them_every_kth_step():
    tx = gradtx.apply_every(3)
    state = tx.init(jnp.zeros(2))
    out = []
    for g in range(1, 8):
        u, state = tx.update(jnp.full(2, float(g)), state)
        out.append(float(u[0]))
    assert out == [0.0, 0.0, 6.0, 0.0, 0.0, 15.0, 0.0]


@pytest.mark.parametrize(
    "k, error, match",
    [(0, ValueError, r"`apply_every`: `k` must be >= 1, got 0"), (2.0, TypeError, r"`k` must be an integer")],
)
def test_a_bad_k_is_refused_when_built(k, error, match):
    with pytest.raises(error, match=match):
        gradtx.apply_every(k)
    with pytest.raises(error, match=match):
        compat.apply_every(k)
