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


def _counts_reference(ok, r):
    """TF's accumulator counts, whichever replicas are taken: per step, min(valid, still needed) are
    taken, the rest dropped; an update (global step) once R have been collected."""
    num, count, dropped = 0, 0, 0
    out = {"count": [], "dropped": [], "num_accumulated": [], "taken": [], "count_before": []}
    for t in range(ok.shape[0]):
        out["count_before"].append(count)
        taken = min(int(ok[t].sum()), r - num)
        num += taken
        dropped += ok.shape[1] - taken
        if num >= r:
            count, num = count + 1, 0
        for k, v in (("count", count), ("dropped", dropped), ("num_accumulated", num), ("taken", taken)):
            out[k].append(v)
    return {k: np.asarray(v) for k, v in out.items()}


def _observe(state):
    return {
        "count": state.count,
        "dropped": state.dropped,
        "num_accumulated": state.num_accumulated,
        "stale": state.stale,
    }


def _one_hot_run(r, ok, *, mode="novma", extra_fn=None, data=None, steps=None, total=None, **kwargs):
    """SGD on gradients e_r (replica r's gradient is the r-th unit vector): each update reveals how often
    each replica's gradient was counted. Returns the counts per applied update ([updates, N]), the
    observed state counters and the replica-0 parameters."""
    steps = ok.shape[0] if steps is None else steps
    grads = np.broadcast_to(np.eye(N, dtype=np.float32), (steps, N, N)).copy()
    tx = sync_replicas(gradtx.sgd(_lr), _util.AXIS if "axis" not in kwargs else kwargs["axis"], r, total)
    got, obs = _util.run(
        tx,
        np.zeros(N, np.float32),
        {"g": grads, "ok": ok, **(data or {})},
        mode=mode,
        grad_fn=lambda p, d: d["g"],
        extra_fn=extra_fn or (lambda t, d: {"replica_ok": d["ok"]}),
        observe=_observe,
        **kwargs,
    )
    for rep in range(1, N):  # the state and the parameters are replicated
        np.testing.assert_array_equal(got[rep], got[0])
    counts, before = [], np.zeros(N)
    for t in range(steps):
        if obs["count"][0][t] > (obs["count"][0][t - 1] if t else 0):
            c = obs["count"][0][t] - 1
            counts.append((before - got[0][t]) * r / _lr(c))
            before = got[0][t]
        else:
            np.testing.assert_array_equal(got[0][t], before)  # no update: the parameters do not move
    return np.asarray(counts), obs, got[0]


def _windows(ref):
    """The steps whose gradients make each update (an update ends its window)."""
    windows, current = [], []
    for t, (before, after) in enumerate(zip(ref["count_before"], ref["count"], strict=True)):
        current.append(t)
        if after > before:
            windows.append(current)
            current = []
    return windows


def _check_counts(counts, r):
    """Whole numbers (float32 rounding aside), R per update: each update is the mean of R gradients."""
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-4)
    np.testing.assert_array_equal(np.round(counts).sum(axis=1), r)
    return np.round(counts)


@pytest.mark.parametrize("mode", ["vma", "novma", "pmap"])
def test_backups_take_turns_so_every_replica_counts_equally(mode):
    """R = 5 of 8, all valid: over 8 steps every replica's gradient counts 5 times (taking replicas 0-4
    every step would train on their shards only)."""
    counts, obs, _ = _one_hot_run(5, np.ones((N, N), bool), mode=mode)
    counts = _check_counts(counts, 5)
    assert counts.shape == (N, N) and counts.max() == 1  # no replica twice in one update
    np.testing.assert_array_equal(counts.sum(axis=0), np.full(N, 5))
    np.testing.assert_array_equal(obs["dropped"][0], 3 * np.arange(1, N + 1))


@pytest.mark.parametrize("mode, r", [("vma", 5), ("novma", 5), ("pmap", 5), ("vma", 8), ("novma", 12)])
def test_random_failures_backups_and_accumulation(mode, r):
    """Only valid gradients count, each at most once per step, R per update; the counters follow TF's
    accumulators; over the run no valid replica is left out."""
    rng = np.random.default_rng(r)
    ok = rng.random((12, N)) < 0.7
    ref = _counts_reference(ok, r)
    counts, obs, _ = _one_hot_run(r, ok, mode=mode, total=N if r > N else None)  # R > N: TF's accumulation
    for k in ("count", "dropped", "num_accumulated"):
        np.testing.assert_array_equal(obs[k][0], ref[k], err_msg=k)
    _check_counts(counts, r)
    assert len(counts) == len(_windows(ref))
    for u, steps in enumerate(_windows(ref)):
        allowed = ok[steps].sum(axis=0)  # a replica counts at most once per step it was valid in
        assert np.all(np.round(counts[u]) <= allowed), (u, counts[u], allowed)
    counted = np.round(counts).sum(axis=0)
    assert counted.min() > 0, counted


def test_a_nan_replica_does_not_poison_the_update():
    rng = np.random.default_rng(1)
    grads = rng.standard_normal((4, N, 3)).astype(np.float32)
    grads[0, 3, 1] = np.nan
    grads[1, 5, :] = np.inf
    grads[2, 0, 0] = -np.inf
    got, obs = _util.run(
        sync_replicas(gradtx.sgd(1.0), _util.AXIS, 7),
        np.zeros(3, np.float32),
        grads,
        mode="vma",
        observe=_observe,
    )
    assert np.isfinite(got).all()
    valid = np.isfinite(grads).all(axis=-1)
    np.testing.assert_array_equal(obs["count"][0], [1, 2, 3, 4])
    np.testing.assert_array_equal(obs["dropped"][0], np.cumsum(N - np.minimum(valid.sum(axis=1), 7)))
    # step 1: replicas 0-2 and 4-7 (3 is NaN); step 2 starts after 7: 0-4, 6, 7 (5 is inf); ...
    taken = [[0, 1, 2, 4, 5, 6, 7], [0, 1, 2, 3, 4, 6, 7], [1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 4, 5, 6]]
    expected = -np.cumsum([grads[t, rows].mean(axis=0) for t, rows in enumerate(taken)], axis=0)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)


def test_fewer_replicas_than_needed_accumulate_across_steps():
    """R = 12 on 8 replicas: step 1 brings 8 (no update), step 2 the next 4 in turn (update), 4 dropped;
    step 4 takes the 4 others."""
    rng = np.random.default_rng(2)
    grads = rng.standard_normal((4, N, 2)).astype(np.float32)
    got, obs = _util.run(
        sync_replicas(gradtx.sgd(_lr), _util.AXIS, 12, total_num_replicas=N),
        np.zeros(2, np.float32),
        grads,
        mode="novma",
        observe=_observe,
    )
    np.testing.assert_array_equal(got[0, 0], np.zeros(2))
    first = np.concatenate([grads[0], grads[1, :4]]).mean(axis=0)
    np.testing.assert_allclose(got[0, 1], -_lr(0) * first, rtol=1e-5, atol=1e-6)
    second = np.concatenate([grads[2], grads[3, 4:]]).mean(axis=0)
    np.testing.assert_allclose(got[0, 3], -_lr(0) * first - _lr(1) * second, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(obs["count"][0], [0, 1, 1, 2])
    np.testing.assert_array_equal(obs["num_accumulated"][0], [8, 0, 8, 0])
    np.testing.assert_array_equal(obs["dropped"][0], [0, 4, 4, 8])


@pytest.mark.parametrize("mode", ["vma", "novma"])
def test_stale_gradients_are_dropped(mode):
    rng = np.random.default_rng(3)
    steps, r = 8, 5
    stale = rng.random((steps, N)) < 0.3
    ref = _counts_reference(~stale, r)
    grad_step = (ref["count_before"][:, None] - stale).astype(np.int32)  # stale: computed one update ago
    counts, obs, _ = _one_hot_run(
        r,
        np.ones((steps, N), bool),
        mode=mode,
        data={"s": grad_step},
        extra_fn=lambda t, d: {"grad_step": d["s"]},
    )
    for k in ("count", "dropped", "num_accumulated"):
        np.testing.assert_array_equal(obs[k][0], ref[k], err_msg=k)
    np.testing.assert_array_equal(obs["stale"][0], np.cumsum(stale.sum(axis=1)))
    _check_counts(counts, r)
    assert len(counts) == len(_windows(ref))
    for u, window in enumerate(_windows(ref)):
        assert np.all(np.round(counts[u]) <= (~stale[window]).sum(axis=0))


def test_replica_order_over_a_tuple_of_axes():
    """On a 2x4 mesh, replica r of ("hosts", "local") is host r // 4, local r % 4; the turn goes on."""
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
    expected = -np.cumsum([grads[0, [1, 3, 4]].mean(axis=0), grads[1, [5, 6, 7]].mean(axis=0)], axis=0)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize("mode", ["vma", "pmap"])
def test_more_replicas_to_aggregate_than_replicas_is_refused_unless_total_is_given(mode):
    """R = 100 on 8 replicas would apply nothing for 12 steps: refused at trace time, naming the way out."""
    tx = sync_replicas(gradtx.sgd(0.1), _util.AXIS, replicas_to_aggregate=100)
    with pytest.raises(
        ValueError,
        match=r"`sync_replicas`: `replicas_to_aggregate`=100, but the axis 'i' has 8 replicas: no step "
        r"brings 100 gradients, so an update would be applied only every 13 steps or less often\. Pass "
        r"`replicas_to_aggregate` <= 8, or `total_num_replicas=8` to accumulate across steps as TF does",
    ):
        _util.run(tx, np.zeros(2, np.float32), np.ones((1, N, 2), np.float32), mode=mode)
    # R = N is no accumulation: applied every step.
    tx = sync_replicas(gradtx.sgd(1.0), _util.AXIS, replicas_to_aggregate=N)
    got, _ = _util.run(tx, np.zeros(2, np.float32), np.ones((1, N, 2), np.float32), mode=mode)
    np.testing.assert_array_equal(got[:, 0], -np.ones((N, 2)))


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


@pytest.mark.parametrize("mode", ["vma", "pmap"])
def test_gradients_near_the_float_maximum_average_without_overflow(mode):
    """Each replica's 3e38 is finite and so is their mean; their sum (inf) is never formed."""
    data = np.full((1, N, 2), 3e38, np.float32)
    tx = sync_replicas(gradtx.sgd(1.0), _util.AXIS, replicas_to_aggregate=N)
    params, _ = _util.run(tx, jnp.zeros(2), jnp.asarray(data), mode=mode)
    np.testing.assert_allclose(params[:, 0], -3e38, rtol=1e-6)
