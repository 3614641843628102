"""gradtx/combinators/_lookahead.py: lookahead against optax.lookahead (fast and slow weights), its sparse
rule and its argument errors (packed params: tests/test_packing.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers


def _optax_run(tx, params, grads_seq):
    """optax's lookahead on `LookaheadParams`: the fast and slow weights after the last step."""
    pair = optax.LookaheadParams.init_synced(params)
    state = tx.init(pair)
    step = jax.jit(lambda pair, state, g: tx.update(g, state, pair))
    for grads in grads_seq:
        updates, state = step(pair, state, grads)
        pair = optax.apply_updates(pair, updates)
    return pair


@pytest.mark.parametrize("reset_state", [False, True], ids=["keep", "reset"])
def test_fast_and_slow_weights_follow_optax_lookahead(reset_state):
    params, grads = helpers.problem(1, steps=8)
    # the same fast optimizer on both sides, so only the wrappers are compared
    ours = gradtx.lookahead(optax.adam(0.1), 3, 0.4, reset_state=reset_state)
    actual, state = helpers.run(ours, params, grads)
    expected = _optax_run(optax.lookahead(optax.adam(0.1), 3, 0.4, reset_state=reset_state), params, grads)
    helpers.assert_trees_close(actual[-1], expected.fast, rtol=1e-6, atol=1e-6, msg="fast")
    helpers.assert_trees_close(gradtx.slow_params(state), expected.slow, rtol=1e-6, atol=1e-6, msg="slow")
    assert gradtx.get_slot(state, "slow") is not None  # the slow weights are a slot


def test_the_slow_weights_move_only_at_synchronisations_and_the_fast_ones_join_them():
    tx = gradtx.chain(gradtx.clip(10.0), gradtx.lookahead(gradtx.sgd(1.0), 2, 0.5))
    params = jnp.zeros(1)
    state = tx.init(params)
    seen = []
    for _ in range(4):
        u, state = tx.update(jnp.array([-1.0]), state, params)
        params = gradtx.apply_updates(params, u)
        seen.append((float(params[0]), float(gradtx.slow_params(state)[0])))
    # fast: 1, then 2 -> synced to 0 + 0.5 * 2 = 1; 2, then 3 -> 1 + 0.5 * (3 - 1) = 2
    assert seen == [(1.0, 0.0), (1.0, 1.0), (2.0, 1.0), (2.0, 2.0)]


def test_a_lazy_fast_optimizer_keeps_its_sparse_rule_between_synchronisations():
    table = jnp.asarray(np.random.default_rng(0).standard_normal((6, 2)), jnp.float32)
    tx = gradtx.lookahead(gradtx.lazy_adam(0.1), 3, 0.5)
    step = jax.jit(lambda p, s, g: tx.update(g, s, p))
    state, moves = tx.init(table), []
    for rows in ([1, 4, 4], [2, 2, 2], [2, 2, 2]):  # the third step synchronises
        u, state = step(table, state, RowSparse(jnp.array(rows), jnp.ones((3, 2)), (6, 2)))
        assert not isinstance(u, RowSparse)  # dense updates
        table = gradtx.apply_updates(table, u)
        moves.append(sorted({int(r) for r in np.nonzero(np.asarray(u))[0]}))
    # LazyAdam moves only the rows of each gradient (dense Adam's momentum would move rows 1 and 4 again);
    # the synchronisation pulls rows 1 and 4 back towards the slow weights, and leaves the rows never touched
    assert moves == [[1, 4], [2], [1, 2, 4]]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"tx": "sgd"}, TypeError, r"`lookahead`: `tx` must be a gradient transformation"),
        ({"sync_period": 0}, ValueError, r"`lookahead`: `sync_period` must be >= 1, got 0\."),
        ({"sync_period": 2.0}, TypeError, r"`lookahead`: `sync_period` must be an integer, got 2.0"),
        (
            {"slow_step_size": 1.5},
            ValueError,
            r"`lookahead`: `slow_step_size` must be in \[0.0, 1.0\], got 1.5",
        ),
        ({"slow_step_size": float("nan")}, ValueError, r"`lookahead`: `slow_step_size` must be finite"),
        ({"reset_state": 1}, TypeError, r"`lookahead`: `reset_state` must be True or False, got 1"),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, error, match):
    args = {"tx": gradtx.sgd(0.1), "sync_period": 2, "slow_step_size": 0.5, **kwargs}
    with pytest.raises(error, match=match):
        gradtx.lookahead(args.pop("tx"), args.pop("sync_period"), args.pop("slow_step_size"), **args)


def test_update_needs_the_params_and_slow_params_needs_a_lookahead_state():
    tx = gradtx.lookahead(gradtx.sgd(0.1), 2, 0.5)
    with pytest.raises(ValueError, match=r"`lookahead`: `update` needs the current parameters"):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
    with pytest.raises(ValueError, match=r"`slow_params`: the state holds no `lookahead` state"):
        gradtx.slow_params(gradtx.sgd(0.1).init(jnp.zeros(2)))
