"""`sharded_state` (ZeRO-1): the same numbers as the unsharded optimizer, 1/N of its state per device."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx.parallel import cross_shard, sharded_state
from gradtx.sparse import RowSparse
from tests.parallel import _util

N, T = _util.N, 5
SHAPES = {"w": (7, 3), "b": (5,), "s": ()}  # 21, 5 and 1 elements: none divides by 8


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    grads = {k: rng.standard_normal((T, N, *s)).astype(np.float32) for k, s in SHAPES.items()}
    return params, grads


def _loss_grads(p, d):
    """Gradients by autodiff of a per-replica loss: under check_vma=True already summed over the axis."""
    return jax.grad(lambda p: sum(jnp.sum(p[k] * d[k]) + 0.5 * jnp.sum(p[k] ** 2) for k in p))(p)


@pytest.mark.parametrize(
    "mode, autodiff",
    [("vma", False), ("novma", False), ("pmap", False), ("vma", True)],
    ids=["vma-per-replica-grads", "novma", "pmap", "vma-autodiff-grads"],
)
def test_trajectory_equals_the_unsharded_optimizer(mode, autodiff):
    params, grads = _problem()
    grad_fn = _loss_grads if autodiff else None
    got, _ = _util.run(sharded_state(gradtx.adam(0.1), _util.AXIS), params, grads, mode=mode, grad_fn=grad_fn)
    ref, _ = _util.run(cross_shard(gradtx.adam(0.1), _util.AXIS), params, grads, mode=mode, grad_fn=grad_fn)
    for k in SHAPES:
        np.testing.assert_allclose(got[k], ref[k], rtol=2e-6, atol=1e-6, err_msg=k)


def test_trajectory_with_a_rule_reading_the_params(reduction="sum"):
    """The inner transform gets this replica's slice of the params too (FTRL's rule reads them)."""
    params, grads = _problem(1)

    def make():
        return gradtx.ftrl(0.1, l1=0.01, l2=0.02, l2_shrinkage=0.01)

    got, _ = _util.run(sharded_state(make(), _util.AXIS, reduction=reduction), params, grads, mode="novma")
    ref, _ = _util.run(cross_shard(make(), _util.AXIS, reduction), params, grads, mode="novma")
    for k in SHAPES:
        np.testing.assert_allclose(got[k], ref[k], rtol=2e-6, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("mode", ["vma"])
def test_tuple_of_axes_on_a_2x4_mesh(mode):
    params, grads = _problem(2)
    m = _util.mesh((2, 4), ("hosts", "local"))
    axes = ("hosts", "local")
    got, _ = _util.run(
        sharded_state(gradtx.rmsprop(0.01), axes), params, grads, mode=mode, axis=axes, mesh_=m
    )
    ref, _ = _util.run(cross_shard(gradtx.rmsprop(0.01), axes), params, grads, mode=mode, axis=axes, mesh_=m)
    for k in SHAPES:
        np.testing.assert_allclose(got[k], ref[k], rtol=2e-6, atol=1e-6, err_msg=k)


def _train_step(tx, m):
    @jax.jit
    @jax.shard_map(mesh=m, in_specs=(P(), P(_util.AXIS), P(_util.AXIS)), out_specs=(P(), P(_util.AXIS)))
    def step(params, state, grads):
        updates, state = tx.update(jax.tree.map(lambda g: g[0], grads), state, params)
        return gradtx.apply_updates(params, updates), state

    return step


def test_per_device_state_is_one_nth_and_round_trips_through_shard_map():
    """The state leaves out of the mapped function with P(axis) and comes back in; each device holds 1/N."""
    m = _util.mesh()
    rng = np.random.default_rng(3)
    shapes = {**SHAPES, "big": (64, 32)}
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    tx = sharded_state(gradtx.adam(0.1), _util.AXIS)
    init = jax.jit(jax.shard_map(tx.init, mesh=m, in_specs=P(), out_specs=P(_util.AXIS)))
    state = init(params)
    adam_state = state.inner[0]
    for k, s in shapes.items():
        k_local = -(-int(np.prod(s)) // N)
        assert adam_state.m[k].shape == (N, k_local), k  # N rows of ceil(size / N): one row per device
        assert len(adam_state.m[k].addressable_shards) == N
        assert adam_state.m[k].addressable_shards[0].data.shape == (1, k_local)
    assert adam_state.m["big"].addressable_shards[0].data.size * N == 64 * 32
    assert adam_state.count.shape == (N,)
    full = sum(int(np.prod(s)) for s in shapes.values())
    per_device = sum(x.addressable_shards[0].data.size for x in jax.tree.leaves(state))
    unsharded = sum(x.size for x in jax.tree.leaves(gradtx.adam(0.1).init(params)))
    assert unsharded > 2 * full and per_device <= unsharded / N + 3 * len(shapes) + 4
    # continue training from the host loop and compare with the replicated optimizer
    step = _train_step(tx, m)
    ref_tx = cross_shard(gradtx.adam(0.1), _util.AXIS)

    @jax.jit
    @jax.shard_map(mesh=m, in_specs=(P(), P(), P(_util.AXIS)), out_specs=(P(), P()))
    def ref_update(params, state, grads):
        updates, state = ref_tx.update(jax.tree.map(lambda g: g[0], grads), state, params)
        return gradtx.apply_updates(params, updates), state

    p, rp, ref_state = params, params, ref_tx.init(params)
    for _ in range(3):
        g = _util.put(
            {k: jnp.asarray(rng.standard_normal((N, *s)), jnp.float32) for k, s in shapes.items()},
            m,
            P(_util.AXIS),
        )
        p, state = jax.block_until_ready(step(p, state, g))
        rp, ref_state = jax.block_until_ready(ref_update(rp, ref_state, g))
    for k in shapes:
        np.testing.assert_allclose(np.asarray(p[k]), np.asarray(rp[k]), rtol=2e-6, atol=1e-6, err_msg=k)
    assert int(np.asarray(state.inner[0].count)[0]) == 3


def test_row_sparse_gradients_are_densified():
    rng = np.random.default_rng(4)
    table = rng.standard_normal((9, 2)).astype(np.float32)
    idx = rng.integers(0, 9, (3, N, 4)).astype(np.int32)
    vals = rng.standard_normal((3, N, 4, 2)).astype(np.float32)
    dense = np.zeros((3, N, 9, 2), np.float32)
    for t in range(3):
        for r in range(N):
            np.add.at(dense[t, r], idx[t, r], vals[t, r])
    tx = sharded_state(gradtx.adagrad(0.1), _util.AXIS)
    got, _ = _util.run(
        tx,
        {"t": table},
        {"i": idx, "v": vals},
        mode="novma",
        grad_fn=lambda p, d: {"t": RowSparse(d["i"], d["v"], (9, 2))},
    )
    ref, _ = _util.run(tx, {"t": table}, {"t": dense}, mode="novma")
    np.testing.assert_allclose(got["t"], ref["t"], rtol=1e-6, atol=1e-6)


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


def test_errors():
    with pytest.raises(
        ValueError, match=r"`sharded_state`: `reduction` must be one of 'mean', 'sum'; got 'avg'"
    ):
        sharded_state(gradtx.sgd(0.1), "i", reduction="avg")
    tx = sharded_state(gradtx.sgd(0.1), "data")
    with pytest.raises(ValueError, match=r"`sharded_state`: the axis name 'data' is not bound"):
        tx.init(jnp.zeros(3))
    with pytest.raises(ValueError, match=r"`sharded_state`: the axis name 'data' is not bound"):
        tx.update(jnp.ones(3), None, jnp.zeros(3))
