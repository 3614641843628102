"""`cross_shard` and `tower_reduce` against single-device steps on the full batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx.parallel import cross_shard, tower_reduce
from gradtx.sparse import RowSparse
from tests import helpers
from tests.parallel import _util

T, B = 6, 4  # steps, rows per replica


def _problem(seed=0, n=_util.N):
    rng = np.random.default_rng(seed)
    params = {
        "w": rng.standard_normal((5, 3)).astype(np.float32),
        "b": rng.standard_normal(3).astype(np.float32),
    }
    x = rng.standard_normal((T, n, B, 5)).astype(np.float32)
    y = rng.standard_normal((T, n, B, 3)).astype(np.float32)
    return params, {"x": x, "y": y}


def _loss(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def _grad_fn(p, d):
    """Autodiff of each replica's loss: under check_vma=True the replicated params' gradients come out
    summed over the replicas."""
    return jax.grad(_loss)(p, d["x"], d["y"])


def _own_grad_fn(axis=_util.AXIS):
    """Each replica's own gradient in every mode (`per_replica`)."""
    return lambda p, d: jax.grad(_loss)(gradtx.parallel.per_replica(p, axis), d["x"], d["y"])


def _large_batch_reference(tx, params, data, reduction="mean"):
    """One device, the whole batch of every step (the replicas' rows concatenated)."""
    scale = data["x"].shape[1] if reduction == "sum" else 1  # "sum": the sum of the replicas' mean losses

    @jax.jit
    def step(params, state, x, y):
        g = jax.tree.map(lambda a: a * scale, jax.grad(_loss)(params, x, y))
        u, state = tx.update(g, state, params)
        return gradtx.apply_updates(params, u), state

    state = tx.init(params)
    out = []
    for t in range(data["x"].shape[0]):
        x = data["x"][t].reshape(-1, data["x"].shape[-1])
        y = data["y"][t].reshape(-1, data["y"].shape[-1])
        params, state = step(params, state, x, y)
        out.append(jax.tree.map(np.asarray, params))
    return out


def _assert_matches(got, ref, rtol=1e-5, atol=1e-6):
    n = jax.tree.leaves(got)[0].shape[0]
    for t, expected in enumerate(ref):
        for r in range(n):
            helpers.assert_trees_close(
                jax.tree.map(lambda a, r=r, t=t: a[r, t], got),
                expected,
                rtol=rtol,
                atol=atol,
                msg=f"step {t}, replica {r}",
            )


@pytest.mark.parametrize(
    "mode, reduction, grads",
    [
        ("vma", "mean", "own"),
        ("vma", "mean", "summed"),
        ("novma", "mean", "autodiff"),
        ("pmap", "mean", "autodiff"),
        ("vma", "sum", "summed"),
        ("pmap", "sum", "autodiff"),
    ],
)
def test_cross_shard_equals_the_large_batch_step(mode, reduction, grads):
    """Each replica's own gradients are psum-ed; gradients autodiff summed (check_vma=True, declared with
    replicated_grads="sum") are not summed again."""
    params, data = _problem()

    def make():
        return gradtx.adam(0.05)

    kwargs = {"replicated_grads": "sum"} if grads == "summed" else {}
    tx = cross_shard(make(), _util.AXIS, reduction, **kwargs)
    grad_fn = _own_grad_fn() if grads == "own" else _grad_fn
    got, _ = _util.run(tx, params, data, mode=mode, grad_fn=grad_fn)
    _assert_matches(got, _large_batch_reference(make(), params, data, reduction))


def _pmean_loss_grads(p, d):
    """The loss averaged over the replicas inside the step (as in JAX's shard_map examples)."""
    return jax.grad(lambda p: jax.lax.pmean(_loss(p, d["x"], d["y"]), _util.AXIS))(p)


@pytest.mark.parametrize("mode", ["vma", "novma", "pmap"])
def test_a_pmean_loss_takes_the_large_batch_step_in_every_mode(mode):
    """The same step code, the loss `pmean`-ed: under check_vma=True autodiff returns the mean gradient
    (declared with replicated_grads="mean"), under check_vma=False / pmap each replica's own; the same
    step either way (it was 1/N of it under check_vma=True)."""
    params, data = _problem(8)
    tx = cross_shard(gradtx.momentum(0.1, 0.9), _util.AXIS, replicated_grads="mean")
    got, _ = _util.run(tx, params, data, mode=mode, grad_fn=_pmean_loss_grads)
    _assert_matches(got, _large_batch_reference(gradtx.momentum(0.1, 0.9), params, data))


@pytest.mark.parametrize(
    "make",
    [
        lambda: cross_shard(gradtx.sgd(0.1), _util.AXIS),
        lambda: tower_reduce(gradtx.sgd(0.1), _util.AXIS),
        lambda: gradtx.parallel.sharded_state(gradtx.sgd(0.1), _util.AXIS),
    ],
    ids=["cross_shard", "tower_reduce", "sharded_state"],
)
def test_gradients_autodiff_combined_need_replicated_grads(make):
    """check_vma=True, a replicated parameter: its gradient is a sum or a mean, which cannot be told apart;
    without `replicated_grads` the wrappers refuse it instead of guessing."""
    params, data = _problem()
    with pytest.raises(
        ValueError,
        match=r"the gradient at \['b'\] does not vary over 'i'.*their sum.*their mean.*"
        r"replicated_grads='sum'.*per_replica",
    ):
        _util.run(make(), params, jax.tree.map(lambda a: a[:1], data), mode="vma", grad_fn=_pmean_loss_grads)


def test_replicated_grads_is_checked():
    with pytest.raises(
        ValueError, match=r"`cross_shard`: `replicated_grads` must be one of 'sum', 'mean'; got 'avg'"
    ):
        cross_shard(gradtx.sgd(0.1), "i", replicated_grads="avg")


@pytest.mark.parametrize("mode", ["vma", "novma"])
def test_cross_shard_reduces_per_replica_gradients(mode):
    """Gradients that vary over the axis (data, or `pcast` params under check_vma=True) are psum-ed."""
    rng = np.random.default_rng(1)
    grads = rng.standard_normal((3, _util.N, 4)).astype(np.float32)
    got, _ = _util.run(
        cross_shard(gradtx.sgd(1.0), _util.AXIS, "sum"), np.zeros(4, np.float32), grads, mode=mode
    )
    np.testing.assert_allclose(got[0], -np.cumsum(grads.sum(axis=1), axis=0), rtol=1e-5, atol=1e-5)


def test_cross_shard_with_an_optax_inner_transform():
    params, data = _problem(2)
    got, _ = _util.run(
        cross_shard(optax.adam(0.05), _util.AXIS), params, data, mode="vma", grad_fn=_own_grad_fn()
    )
    _assert_matches(got, _large_batch_reference(optax.adam(0.05), params, data))


@pytest.mark.parametrize("mode, reduction", [("vma", "mean"), ("novma", "sum")])
def test_tower_reduce_over_a_2x4_mesh(mode, reduction):
    """Hierarchical towers: 4 per host, then 2 hosts; equal to the large-batch step."""
    params, data = _problem(3)
    m = _util.mesh((2, 4), ("hosts", "local"))
    tx = tower_reduce(gradtx.momentum(0.1, 0.9), ("local", "hosts"), loss_reduction=reduction)
    grad_fn = _own_grad_fn(("hosts", "local"))
    got, _ = _util.run(tx, params, data, mode=mode, grad_fn=grad_fn, axis=("hosts", "local"), mesh_=m)
    _assert_matches(got, _large_batch_reference(gradtx.momentum(0.1, 0.9), params, data, reduction))


@pytest.mark.parametrize("mode", _util.MODES)
def test_axis_index_groups_reduce_each_group(mode):
    rng = np.random.default_rng(4)
    grads = rng.standard_normal((2, _util.N, 3)).astype(np.float32)
    groups = [[0, 2, 4, 6], [1, 3, 5, 7]]
    tx = cross_shard(gradtx.sgd(1.0), _util.AXIS, axis_index_groups=groups)
    got, _ = _util.run(tx, np.zeros(3, np.float32), grads, mode=mode, per_replica=True)
    for r in range(_util.N):
        members = groups[r % 2]
        np.testing.assert_allclose(
            got[r], -np.cumsum(grads[:, members].mean(axis=1), axis=0), rtol=1e-5, atol=1e-6
        )


def test_axis_index_groups_refuse_gradients_already_summed_by_autodiff():
    params, data = _problem()
    tx = cross_shard(gradtx.sgd(0.1), _util.AXIS, axis_index_groups=[[0, 1, 2, 3], [4, 5, 6, 7]])
    with pytest.raises(ValueError, match=r"`cross_shard`: with `axis_index_groups`, the gradient must vary"):
        _util.run(tx, params, data, mode="vma", grad_fn=_grad_fn)


def _sparse_data(seed=5, rows=10, k=3, steps=3):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, rows // 2, (steps, _util.N, k)).astype(np.int32)  # rows >= 5 are never touched
    vals = rng.standard_normal((steps, _util.N, k, 2)).astype(np.float32)
    return idx, vals


@pytest.mark.parametrize("mode", ["vma", "pmap"])
def test_row_sparse_gradients_are_gathered_and_stay_sparse(mode):
    rows = 10
    idx, vals = _sparse_data(rows=rows)
    table = np.random.default_rng(6).standard_normal((rows, 2)).astype(np.float32)

    def grad_fn(p, d):
        return {"table": RowSparse(d["idx"], d["vals"], (rows, 2))}

    tx = cross_shard(gradtx.adagrad(0.1), _util.AXIS)
    got, _ = _util.run(tx, {"table": table}, {"idx": idx, "vals": vals}, mode=mode, grad_fn=grad_fn)
    # reference: dense mean over the replicas, same optimizer
    ref_tx, params = gradtx.adagrad(0.1), {"table": table}
    state = ref_tx.init(params)
    for t in range(idx.shape[0]):
        dense = np.zeros((_util.N, rows, 2), np.float32)
        for r in range(_util.N):
            np.add.at(dense[r], idx[t, r], vals[t, r])
        u, state = ref_tx.update({"table": dense.mean(axis=0)}, state, params)
        params = gradtx.apply_updates(params, u)
        helpers.assert_trees_close(
            got["table"][:, t],
            np.broadcast_to(params["table"], (_util.N, rows, 2)),
            rtol=1e-5,
            atol=1e-6,
            msg=f"step {t}",
        )
    np.testing.assert_array_equal(got["table"][:, -1, 5:], np.broadcast_to(table[5:], (_util.N, 5, 2)))


def test_row_sparse_update_has_every_replicas_rows():
    m = _util.mesh()
    tx = cross_shard(gradtx.sgd(1.0), _util.AXIS)

    def f(idx, vals):
        u, _ = tx.update({"t": RowSparse(idx[0], vals[0], (10, 2))}, tx.init({"t": jnp.zeros((10, 2))}))
        return u["t"].indices, u["t"].values

    idx = jnp.arange(16, dtype=jnp.int32).reshape(8, 2) % 10
    vals = jnp.ones((8, 2, 2))
    got_idx, got_vals = jax.jit(jax.shard_map(f, mesh=m, in_specs=P(_util.AXIS), out_specs=P()))(
        *_util.put((idx, vals), m, P(_util.AXIS))
    )
    np.testing.assert_array_equal(np.asarray(got_idx), np.asarray(idx).reshape(-1))
    np.testing.assert_allclose(np.asarray(got_vals), -np.ones((16, 2)) / 8)


# --------------------------------------------------------------------------- errors


def test_bad_reduction_is_refused():
    with pytest.raises(
        ValueError, match=r"`cross_shard`: `reduction` must be one of 'mean', 'sum'; got 'max'"
    ):
        cross_shard(gradtx.sgd(0.1), "i", "max")
    with pytest.raises(
        ValueError, match=r"`tower_reduce`: `loss_reduction` must be one of 'mean', 'sum'; got 'none'"
    ):
        tower_reduce(gradtx.sgd(0.1), "i", loss_reduction="none")


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match=r"`cross_shard`: `tx` must be a gradient transformation"):
        cross_shard(0.1, "i")
    with pytest.raises(TypeError, match=r"`tower_reduce`: `axis_name` must be a hashable name"):
        tower_reduce(gradtx.sgd(0.1), ["a", "b"])
    with pytest.raises(ValueError, match=r"`cross_shard`: `axis_name` must be a name or a non-empty tuple"):
        cross_shard(gradtx.sgd(0.1), ())
    with pytest.raises(ValueError, match=r"`cross_shard`: `axis_index_groups` needs a single axis name"):
        cross_shard(gradtx.sgd(0.1), ("a", "b"), axis_index_groups=[[0], [1]])
    with pytest.raises(ValueError, match=r"`cross_shard`: `axis_index_groups` must be equal-sized groups"):
        cross_shard(gradtx.sgd(0.1), "i", axis_index_groups=[[0, 1], [2]])
    with pytest.raises(
        TypeError, match=r"`cross_shard`: `axis_index_groups` must be a list of non-empty lists"
    ):
        cross_shard(gradtx.sgd(0.1), "i", axis_index_groups=[0, 1])


def test_groups_must_cover_the_axis():
    tx = cross_shard(gradtx.sgd(0.1), _util.AXIS, axis_index_groups=[[0, 1], [2, 3]])
    with pytest.raises(
        ValueError, match=r"`cross_shard`: `axis_index_groups` covers 4 replicas, but the axis has 8"
    ):
        _util.run(tx, np.zeros(2, np.float32), np.ones((1, 8, 2), np.float32), mode="novma")


@pytest.mark.parametrize(
    "make",
    [
        lambda: cross_shard(gradtx.sgd(0.1), "batch"),
        lambda: tower_reduce(gradtx.sgd(0.1), ("batch", "hosts")),
    ],
    ids=["cross_shard", "tower_reduce"],
)
def test_outside_the_mapped_axis_update_raises(make):
    tx = make()
    params = jnp.zeros(2)
    with pytest.raises(
        ValueError,
        match=r"the axis name 'batch' is not bound here.*jax.shard_map.*"
        r"jax.pmap\(step, axis_name='batch'\).*tpu_shard_context",
    ):
        tx.update(jnp.ones(2), tx.init(params), params)
    with pytest.raises(ValueError, match=r"the axis name 'batch' is not bound"):
        jax.jit(tx.update)(jnp.ones(2), tx.init(params), params)


def test_inside_another_axis_update_raises():
    tx = cross_shard(gradtx.sgd(0.1), "batch")
    with pytest.raises(ValueError, match=r"`cross_shard`: the axis name 'batch' is not bound"):
        jax.pmap(lambda g: tx.update(g, tx.init(g))[0], axis_name="i")(jnp.ones((8, 2)))


def test_tower_reduce_with_one_axis_under_pmap():
    params, data = _problem(7)
    tx = tower_reduce(gradtx.adagrad(0.1), _util.AXIS)
    got, _ = _util.run(tx, params, data, mode="pmap", grad_fn=_grad_fn)
    _assert_matches(got, _large_batch_reference(gradtx.adagrad(0.1), params, data))
