"""`sync_replicas` against a NumPy simulation of its rule, and `drop_stale_gradients`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.parallel import drop_stale_gradients, sync_replicas
from gradtx.sparse import RowSparse
from tests.parallel import _util

N = _util.N


def _lr(count):  # a schedule: the inner optimizer's step counter must advance once per applied update
    return 0.1 * (1.0 + count)


def _simulate(grads, ok, r, params):
    """float64 reference: the first R valid replicas in replica order, accumulated across steps."""
    acc, num, count, dropped = np.zeros_like(params, np.float64), 0, 0, 0
    p = params.astype(np.float64)
    out = {"params": [], "count": [], "dropped": [], "num_accumulated": []}
    counts_before = []
    for t in range(grads.shape[0]):
        counts_before.append(count)
        taken = [i for i in range(grads.shape[1]) if ok[t, i]][: r - num]
        acc = acc + sum((grads[t, i].astype(np.float64) for i in taken), np.zeros_like(acc))
        num += len(taken)
        dropped += grads.shape[1] - len(taken)
        if num >= r:
            p = p - _lr(count) * acc / r
            count, acc, num = count + 1, np.zeros_like(acc), 0
        for k, v in zip(out, (p, count, dropped, num), strict=True):
            out[k].append(v)
    return {k: np.asarray(v) for k, v in out.items()}, counts_before


def _observe(state):
    return {
        "count": state.count,
        "dropped": state.dropped,
        "num_accumulated": state.num_accumulated,
        "stale": state.stale,
    }


def _check(got, obs, ref):
    for rep in range(N):
        np.testing.assert_allclose(got[rep], ref["params"], rtol=1e-5, atol=1e-6, err_msg=f"replica {rep}")
        for k in ("count", "dropped", "num_accumulated"):
            np.testing.assert_array_equal(obs[k][rep], ref[k], err_msg=k)


@pytest.mark.parametrize("mode, r", [("vma", 5), ("novma", 5), ("pmap", 5), ("vma", 8), ("novma", 12)])
def test_random_failures_backups_and_accumulation_match_the_simulation(mode, r):
    rng = np.random.default_rng(r)
    steps = 6
    grads = rng.standard_normal((steps, N, 3)).astype(np.float32)
    ok = rng.random((steps, N)) < 0.7
    params = rng.standard_normal(3).astype(np.float32)
    ref, _ = _simulate(grads, ok, r, params)
    tx = sync_replicas(gradtx.sgd(_lr), _util.AXIS, r)
    got, obs = _util.run(
        tx,
        params,
        {"g": grads, "ok": ok},
        mode=mode,
        grad_fn=lambda p, d: d["g"],
        extra_fn=lambda t, d: {"replica_ok": d["ok"]},
        observe=_observe,
    )
    _check(got, obs, ref)


@pytest.mark.parametrize("mode", ["vma", "novma"])
def test_backup_replicas_are_dropped(mode):
    """8 replicas, 6 to aggregate: the first 6 in replica order make each update, 2 are dropped."""
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((3, N, 2)).astype(np.float32)
    tx = sync_replicas(gradtx.sgd(1.0), _util.AXIS, replicas_to_aggregate=6, total_num_replicas=8)
    got, obs = _util.run(tx, np.zeros(2, np.float32), grads, mode=mode, observe=_observe)
    np.testing.assert_allclose(got[0], -np.cumsum(grads[:, :6].mean(axis=1), axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(obs["dropped"][0], [2, 4, 6])
    np.testing.assert_array_equal(obs["count"][0], [1, 2, 3])


@pytest.mark.parametrize("mode", ["vma", "pmap"])
def test_a_nan_replica_does_not_poison_the_update(mode):
    rng = np.random.default_rng(1)
    grads = rng.standard_normal((4, N, 3)).astype(np.float32)
    grads[0, 3, 1] = np.nan
    grads[1, 5, :] = np.inf
    grads[2, 0, 0] = -np.inf
    params = np.zeros(3, np.float32)
    ref, _ = _simulate(grads, np.isfinite(grads).all(axis=-1), 7, params)
    got, obs = _util.run(
        sync_replicas(gradtx.sgd(_lr), _util.AXIS, 7), params, grads, mode=mode, observe=_observe
    )
    assert np.isfinite(got).all()
    _check(got, obs, ref)


def test_fewer_replicas_than_needed_accumulate_across_steps():
    """R = 12 on 8 replicas: step 1 brings 8 (no update), step 2 the 4 missing ones (update), 4 dropped."""
    rng = np.random.default_rng(2)
    grads = rng.standard_normal((4, N, 2)).astype(np.float32)
    got, obs = _util.run(
        sync_replicas(gradtx.sgd(_lr), _util.AXIS, 12),
        np.zeros(2, np.float32),
        grads,
        mode="novma",
        observe=_observe,
    )
    np.testing.assert_array_equal(got[0, 0], np.zeros(2))
    first = np.concatenate([grads[0], grads[1, :4]]).mean(axis=0)
    np.testing.assert_allclose(got[0, 1], -_lr(0) * first, rtol=1e-5, atol=1e-6)
    second = np.concatenate([grads[2], grads[3, :4]]).mean(axis=0)
    np.testing.assert_allclose(got[0, 3], -_lr(0) * first - _lr(1) * second, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(obs["count"][0], [0, 1, 1, 2])
    np.testing.assert_array_equal(obs["num_accumulated"][0], [8, 0, 8, 0])
    np.testing.assert_array_equal(obs["dropped"][0], [0, 4, 4, 8])


@pytest.mark.parametrize("mode", ["vma", "novma"])
def test_stale_gradients_are_dropped(mode):
    rng = np.random.default_rng(3)
    steps, r = 6, 5
    grads = rng.standard_normal((steps, N, 2)).astype(np.float32)
    stale = rng.random((steps, N)) < 0.3
    ref, counts = _simulate(grads, ~stale, r, np.zeros(2, np.float32))
    grad_step = (np.asarray(counts)[:, None] - stale).astype(np.int32)  # stale: computed one update ago
    tx = sync_replicas(gradtx.sgd(_lr), _util.AXIS, r)
    got, obs = _util.run(
        tx,
        np.zeros(2, np.float32),
        {"g": grads, "s": grad_step},
        mode=mode,
        grad_fn=lambda p, d: d["g"],
        extra_fn=lambda t, d: {"grad_step": d["s"]},
        observe=_observe,
    )
    _check(got, obs, ref)
    np.testing.assert_array_equal(obs["stale"][0], np.cumsum(stale.sum(axis=1)))


def test_replica_order_over_a_tuple_of_axes():
    """On a 2x4 mesh, replica r of ("hosts", "local") is host r // 4, local r % 4."""
    rng = np.random.default_rng(4)
    grads = rng.standard_normal((2, N, 2)).astype(np.float32)
    ok = np.ones((2, N), bool)
    ok[:, [0, 2]] = False
    m = _util.mesh((2, 4), ("hosts", "local"))
    tx = sync_replicas(gradtx.sgd(1.0), ("hosts", "local"), 3)
    got, _ = _util.run(
        tx,
        np.zeros(2, np.float32),
        {"g": grads, "ok": ok},
        mode="vma",
        grad_fn=lambda p, d: d["g"],
        extra_fn=lambda t, d: {"replica_ok": d["ok"]},
        axis=("hosts", "local"),
        mesh_=m,
    )
    np.testing.assert_allclose(
        got[0], -np.cumsum(grads[:, [1, 3, 4]].mean(axis=1), axis=0), rtol=1e-5, atol=1e-6
    )


def test_gradients_already_summed_by_autodiff_are_refused():
    data = np.ones((1, N, 2), np.float32)
    tx = sync_replicas(gradtx.sgd(0.1), _util.AXIS, 4)
    with pytest.raises(
        ValueError, match=r"`sync_replicas`: needs each replica's own gradient.*already summed"
    ):
        _util.run(
            tx,
            np.zeros(2, np.float32),
            data,
            mode="vma",
            grad_fn=lambda p, d: jax.grad(lambda p: jnp.sum(p * d))(p),
        )


def test_total_num_replicas_must_match_the_axis():
    tx = sync_replicas(gradtx.sgd(0.1), _util.AXIS, 4, total_num_replicas=6)
    with pytest.raises(ValueError, match=r"`sync_replicas`: `total_num_replicas`=6, but the axis 'i' has 8"):
        _util.run(tx, np.zeros(2, np.float32), np.ones((1, N, 2), np.float32), mode="novma")


def test_construction_and_call_errors():
    with pytest.raises(ValueError, match=r"`sync_replicas`: `replicas_to_aggregate` must be >= 1, got 0"):
        sync_replicas(gradtx.sgd(0.1), "i", 0)
    with pytest.raises(TypeError, match=r"`sync_replicas`: `total_num_replicas` must be an integer"):
        sync_replicas(gradtx.sgd(0.1), "i", 2, 2.5)
    tx = sync_replicas(gradtx.sgd(0.1), "data", 2)
    with pytest.raises(ValueError, match=r"`sync_replicas`: the axis name 'data' is not bound"):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
    with pytest.raises(ValueError, match=r"`sync_replicas`: `replica_ok` must be a bool scalar per replica"):
        _util.run(
            sync_replicas(gradtx.sgd(0.1), _util.AXIS, 2),
            np.zeros(2, np.float32),
            np.ones((1, N, 2), np.float32),
            mode="novma",
            extra_fn=lambda t, d: {"replica_ok": d > 0},
        )


# --------------------------------------------------------------------------- drop_stale_gradients


def test_drop_stale_gradients_follows_tf_rule():
    """Applied when count - grad_step <= staleness; a dropped step changes nothing but stale_counter."""
    tx = drop_stale_gradients(gradtx.momentum(0.1, 0.9), staleness=1)
    ref_tx = gradtx.momentum(0.1, 0.9)
    params = ref_params = jnp.array([1.0, -2.0])
    state, ref_state = tx.init(params), ref_tx.init(params)
    grad_steps = [0, 0, 0, 2, 0, 3, 3]  # counts before: 0, 1, 2 (drop), 2, 3 (drop), 3, 4
    expected_accept = [True, True, False, True, False, True, True]
    step = jax.jit(lambda g, s, p, gs: tx.update(g, s, p, grad_step=gs))
    dropped = 0
    for t, (gs, accept) in enumerate(zip(grad_steps, expected_accept, strict=True)):
        g = jnp.array([0.5 * t, 1.0 - t])
        before = state
        u, state = step(g, state, params, gs)
        params = gradtx.apply_updates(params, u)
        if accept:
            ru, ref_state = ref_tx.update(g, ref_state, ref_params)
            ref_params = gradtx.apply_updates(ref_params, ru)
        else:
            dropped += 1
            np.testing.assert_array_equal(np.asarray(u), 0)
            jax.tree.map(np.testing.assert_array_equal, state.inner, before.inner)
        np.testing.assert_allclose(params, ref_params, rtol=1e-6)
        assert int(state.stale_counter) == dropped
    assert int(state.count) == 5


def test_drop_stale_gradients_keeps_row_sparse_rules():
    tx = drop_stale_gradients(gradtx.adagrad(0.1), staleness=0)
    table = jnp.arange(12.0).reshape(6, 2)
    g = RowSparse(jnp.array([1, 3]), jnp.ones((2, 2)), (6, 2))
    u, state = tx.update({"t": g}, tx.init({"t": table}), {"t": table}, grad_step=0)
    new, old = np.asarray(gradtx.apply_updates({"t": table}, u)["t"]), np.asarray(table)
    assert u["t"].indices.shape == (2,)  # the inner rule got (and returned) a row-sparse gradient
    np.testing.assert_array_equal(new[[0, 2, 4, 5]], old[[0, 2, 4, 5]])
    assert not np.allclose(new[[1, 3]], old[[1, 3]])
    u, state = tx.update({"t": g}, state, {"t": table}, grad_step=-1)
    np.testing.assert_array_equal(gradtx.apply_updates({"t": table}, u)["t"], table)


def test_drop_stale_gradients_errors():
    with pytest.raises(ValueError, match=r"`drop_stale_gradients`: `staleness` must be >= 0, got -1"):
        drop_stale_gradients(gradtx.sgd(0.1), -1)
    with pytest.raises(TypeError, match=r"`drop_stale_gradients`: `staleness` must be an integer"):
        drop_stale_gradients(gradtx.sgd(0.1), 1.5)
    tx = drop_stale_gradients(gradtx.sgd(0.1), 2)
    with pytest.raises(
        gradtx.MissingExtraArgError,
        match=r"`drop_stale_gradients`: `update` needs the extra "
        r"argument `grad_step`",
    ):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
