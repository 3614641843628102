"""`sharded_state` (ZeRO-1) inside shard_map / pmap: the numbers of the unsharded optimizer on one device,
1/N of its state per device, a reduce-scatter and an all-gather in the compiled step, and rules that need
more than one element refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
from benchmarks.sharding import count
from gradtx.parallel import sharded_state
from gradtx.sparse import RowSparse
from tests.parallel import _util

N, T = _util.N, 5
SHAPES = {"w": (7, 3), "b": (5,), "s": ()}  # 21, 5 and 1 elements: none divides by 8


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    grads = {k: rng.standard_normal((T, N, *s)).astype(np.float32) for k, s in SHAPES.items()}
    return params, grads


def _loss(p, d):
    return sum(jnp.sum(p[k] * d[k]) + 0.5 * jnp.sum(p[k] ** 2) for k in p)


def _autodiff(p, d):
    """Gradients by autodiff of a per-replica loss: under check_vma=True already summed over the axis."""
    return jax.grad(_loss)(p, d)


def _own(p, d):
    """Each replica's own gradient, in every mode."""
    return jax.grad(_loss)(gradtx.parallel.per_replica(p, _util.AXIS), d)


def _unsharded(tx, params, grads, reduction="mean", autodiff=False):
    """One device: the plain transform on the replicas' mean (or sum) gradient of every step."""
    state, p, out = tx.init(params), jax.tree.map(jnp.asarray, params), []
    combine = np.mean if reduction == "mean" else np.sum
    step = jax.jit(lambda g, s, p: tx.update(g, s, p))
    for t in range(T):
        g = {k: combine(grads[k][t], axis=0) + (p[k] if autodiff else 0) for k in grads}
        u, state = step(g, state, p)
        p = gradtx.apply_updates(p, u)
        out.append(jax.tree.map(np.asarray, p))
    return {k: np.stack([o[k] for o in out]) for k in params}


def _assert_all_replicas(got, ref, rtol=2e-6, atol=1e-6):
    for k in ref:
        np.testing.assert_allclose(
            got[k], np.broadcast_to(ref[k], got[k].shape), rtol=rtol, atol=atol, err_msg=k
        )


@pytest.mark.parametrize(
    "mode, grads",
    [("vma", "own"), ("vma", "summed"), ("novma", "own"), ("pmap", "data")],
)
def test_trajectory_equals_the_unsharded_optimizer_on_one_device(mode, grads):
    params, data = _problem()
    grad_fn = {"own": _own, "summed": _autodiff, "data": None}[grads]
    kwargs = {"replicated_grads": "sum"} if grads == "summed" else {}
    tx = sharded_state(gradtx.adam(0.1), _util.AXIS, **kwargs)
    got, _ = _util.run(tx, params, data, mode=mode, grad_fn=grad_fn)
    _assert_all_replicas(got, _unsharded(gradtx.adam(0.1), params, data, autodiff=grad_fn is not None))


def test_a_pmean_loss_declared_as_a_mean():
    params, data = _problem(6)

    def grad_fn(p, d):
        return jax.grad(lambda p: jax.lax.pmean(_loss(p, d), _util.AXIS))(p)

    tx = sharded_state(gradtx.momentum(0.1, 0.9), _util.AXIS, replicated_grads="mean")
    got, _ = _util.run(tx, params, data, mode="vma", grad_fn=grad_fn)
    _assert_all_replicas(got, _unsharded(gradtx.momentum(0.1, 0.9), params, data, autodiff=True))


def test_trajectory_with_a_rule_reading_the_params():
    """The inner transform gets this replica's slice of the params too (FTRL's rule reads them)."""
    params, grads = _problem(1)

    def make():
        return gradtx.ftrl(0.1, l1=0.01, l2=0.02, l2_shrinkage=0.01)

    got, _ = _util.run(sharded_state(make(), _util.AXIS, reduction="sum"), params, grads, mode="novma")
    _assert_all_replicas(got, _unsharded(make(), params, grads, "sum"), rtol=1e-5)


def test_tuple_of_axes_on_a_2x4_mesh():
    params, grads = _problem(2)
    m = _util.mesh((2, 4), ("hosts", "local"))
    axes = ("hosts", "local")
    got, _ = _util.run(
        sharded_state(gradtx.rmsprop(0.01), axes), params, grads, mode="vma", axis=axes, mesh_=m
    )
    _assert_all_replicas(got, _unsharded(gradtx.rmsprop(0.01), params, grads))


def _train_step(tx, m, *, check_vma=True, own=True):
    def step(params, state, x):
        q = gradtx.parallel.per_replica(params, _util.AXIS) if own else params
        grads = jax.grad(lambda p: jnp.mean(jnp.tanh(x @ p["w"] + p["b"]) ** 2))(q)
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    specs = dict(in_specs=(P(), P(_util.AXIS), P(_util.AXIS)), out_specs=(P(), P(_util.AXIS)))
    return jax.jit(jax.shard_map(step, mesh=m, check_vma=check_vma, **specs))


@pytest.mark.parametrize("check_vma", [True, False], ids=["vma", "novma"])
def test_the_step_reduce_scatters_and_all_gathers(check_vma):
    """ZeRO-1's communication: per step one reduce-scatter of the gradients and one all-gather of the
    updates (XLA combines the leaves), no all-reduce -- with replicated params under check_vma=True too."""
    m = _util.mesh()
    params = {"w": jnp.ones((16, 64)), "b": jnp.zeros(64)}
    tx = sharded_state(gradtx.adam(0.1), _util.AXIS)
    state = jax.eval_shape(jax.shard_map(tx.init, mesh=m, in_specs=P(), out_specs=P(_util.AXIS)), params)
    x = jax.ShapeDtypeStruct((64, 16), jnp.float32, sharding=jax.NamedSharding(m, P(_util.AXIS)))
    got = count(_train_step(tx, m, check_vma=check_vma).lower(params, state, x).compile().as_text())
    assert got["reduce-scatter"] >= 1 and got["all-gather"] >= 1 and got["all-reduce"] == 0, got
    # gradients autodiff already all-reduced (declared with replicated_grads): only sliced, as documented
    summed = sharded_state(gradtx.adam(0.1), _util.AXIS, replicated_grads="sum")
    got = count(_train_step(summed, m, own=False).lower(params, state, x).compile().as_text())
    assert got["all-reduce"] >= 1 and got["reduce-scatter"] == 0, got


def test_per_device_state_is_one_nth_and_round_trips_through_shard_map():
    """The state leaves the mapped function with P(axis) and comes back in; each device holds 1/N."""
    m = _util.mesh()
    rng = np.random.default_rng(3)
    shapes = {"w": (16, 8), "b": (8,), "big": (64, 32)}
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    tx = sharded_state(gradtx.adam(0.1), _util.AXIS)
    state = jax.jit(jax.shard_map(tx.init, mesh=m, in_specs=P(), out_specs=P(_util.AXIS)))(params)
    adam_state = state.inner[0]
    for k, s in shapes.items():
        k_local = -(-int(np.prod(s)) // N)
        assert adam_state.m[k].shape == (N, k_local), k  # N rows of ceil(size / N): one row per device
        assert adam_state.m[k].addressable_shards[0].data.shape == (1, k_local)
    per_device = sum(x.addressable_shards[0].data.size for x in jax.tree.leaves(state))
    unsharded = sum(x.size for x in jax.tree.leaves(gradtx.adam(0.1).init(params)))
    assert per_device <= unsharded / N + 4
    # continue training from the host loop and compare with the unsharded optimizer on one device
    step = _train_step(tx, m)
    ref_tx, ref_p = gradtx.adam(0.1), params
    ref_state = ref_tx.init(params)

    def ref_loss(p, x):  # the replicas' mean of their mean losses: the mean over the whole batch
        return jnp.mean(jnp.tanh(x @ p["w"] + p["b"]) ** 2)

    p = params
    for _ in range(3):
        x = rng.standard_normal((64, 16)).astype(np.float32)
        batch = {**p, "big": p["big"]}
        p, state = jax.block_until_ready(step(batch, state, _util.put(x, m, P(_util.AXIS))))
        u, ref_state = ref_tx.update(jax.grad(ref_loss)(ref_p, x), ref_state, ref_p)
        ref_p = gradtx.apply_updates(ref_p, u)
    for k in shapes:
        np.testing.assert_allclose(np.asarray(p[k]), np.asarray(ref_p[k]), rtol=1e-5, atol=1e-6, err_msg=k)
    assert int(np.asarray(state.inner[0].count)[0]) == 3


def test_row_sparse_gradients_are_densified():
    rng = np.random.default_rng(4)
    table = rng.standard_normal((9, 2)).astype(np.float32)
    idx = rng.integers(0, 9, (T, N, 4)).astype(np.int32)
    vals = rng.standard_normal((T, N, 4, 2)).astype(np.float32)
    dense = np.zeros((T, N, 9, 2), np.float32)
    for t in range(T):
        for r in range(N):
            np.add.at(dense[t, r], idx[t, r], vals[t, r])
    got, _ = _util.run(
        sharded_state(gradtx.adagrad(0.1), _util.AXIS),
        {"t": table},
        {"i": idx, "v": vals},
        mode="novma",
        grad_fn=lambda p, d: {"t": RowSparse(d["i"], d["v"], (9, 2))},
    )
    _assert_all_replicas(got, _unsharded(gradtx.adagrad(0.1), {"t": table}, {"t": dense}), rtol=1e-5)


def test_bfloat16_is_kept():
    params, grads = _problem(5)
    params = jax.tree.map(lambda x: jnp.asarray(x, jnp.bfloat16), params)
    grads = jax.tree.map(lambda x: np.asarray(jnp.asarray(x, jnp.bfloat16)), grads)
    got, dtypes = _util.run(
        sharded_state(gradtx.adam(0.1), _util.AXIS),
        params,
        grads,
        mode="vma",
        observe=lambda s: jax.tree.map(lambda x: jnp.zeros((), x.dtype), s.inner[0].m),
    )
    assert {k: v.dtype for k, v in got.items()} == {k: jnp.bfloat16 for k in SHAPES}
    assert {k: v.dtype for k, v in dtypes.items()} == {k: jnp.bfloat16 for k in SHAPES}


def test_element_wise_rules_that_mix_elements_are_refused():
    """GGT flattens all leaves into one vector: on a slice it would see 1/N of it (global reductions such
    as `clip_by_global_norm` run on the slices: tests/parallel/test_sharded_reductions.py)."""
    params, grads = _problem()
    with pytest.raises(
        ValueError,
        match=r"`sharded_state`: `tx` is not element by element: its update uses `[a-z_]+`.*mesh=",
    ):
        _util.run(
            sharded_state(gradtx.ggt(0.1), _util.AXIS),
            params,
            jax.tree.map(lambda g: g[:1], grads),
            mode="novma",
        )


@pytest.mark.parametrize(
    "inner", [lambda: gradtx.shampoo(0.1), lambda: gradtx.muon(0.1)], ids=["shampoo", "muon"]
)
def test_leaf_wise_rules_are_refused_without_a_mesh(inner):
    """A rule that needs whole matrices (a matrix root, an orthogonalization) needs whole tensors: refused at
    construction (LARS's and LAMB's norms, Adafactor's and SM3's row and column statistics are taken over
    the slices: test_sharded_reductions.py)."""
    with pytest.raises(ValueError, match=r"`sharded_state`: `[a-z_0-9]+`.* is leaf-wise.*under `jax.jit`"):
        sharded_state(inner(), "data")


def test_errors():
    with pytest.raises(
        ValueError, match=r"`sharded_state`: `reduction` must be one of 'mean', 'sum'; got 'avg'"
    ):
        sharded_state(gradtx.sgd(0.1), "i", reduction="avg")
    with pytest.raises(TypeError, match=r"`sharded_state`: `mesh` must be a `jax.sharding.Mesh`"):
        sharded_state(gradtx.sgd(0.1), "i", mesh="data")
    with pytest.raises(ValueError, match=r"`sharded_state`: `mesh` has the axes \('i',\), not 'data'"):
        sharded_state(gradtx.sgd(0.1), "data", mesh=_util.mesh())
    tx = sharded_state(gradtx.sgd(0.1), "data")
    with pytest.raises(ValueError, match=r"`sharded_state`: the axis name 'data' is not bound"):
        tx.init(jnp.zeros(3))
    with pytest.raises(ValueError, match=r"`sharded_state`: the axis name 'data' is not bound"):
        tx.update(jnp.ones(3), None, jnp.zeros(3))
