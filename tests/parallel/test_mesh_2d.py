"""A ("data", "model") mesh of 4 x 2: the wrappers reduce over "data" while the parameters are sharded over
"model" -- inside a shard_map over both axes (the model-parallel math written by hand), and under jit with a
shard_map over "data" only (GSPMD shards "model"). Every result equals one device on the whole batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx.parallel import cross_shard, sharded_state, sync_replicas, tower_reduce

T, ROWS = 3, 32
MESH = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))  # auto axes
SPECS = {"w": P(None, "model"), "b": P("model"), "s": P()}  # a kernel and bias split over "model"
WRAPPERS = {
    "cross_shard": (lambda: cross_shard(gradtx.adam(0.05), "data"), lambda: gradtx.adam(0.05)),
    "tower_reduce": (
        lambda: tower_reduce(gradtx.momentum(0.1, 0.9), "data"),
        lambda: gradtx.momentum(0.1, 0.9),
    ),
    "sync_replicas": (lambda: sync_replicas(gradtx.sgd(0.2), "data", 4), lambda: gradtx.sgd(0.2)),
    "sharded_state": (lambda: sharded_state(gradtx.adam(0.05), "data"), lambda: gradtx.adam(0.05)),
}


def _problem():
    rng = np.random.default_rng(0)
    params = {
        "w": rng.standard_normal((4, 8)).astype(np.float32),
        "b": np.zeros(8, np.float32),
        "s": np.ones(4, np.float32),  # replicated over both axes
    }
    x = rng.standard_normal((T, ROWS, 4)).astype(np.float32)
    y = rng.standard_normal((T, ROWS, 8)).astype(np.float32)
    return params, x, y


def _loss(p, x, y):
    return jnp.mean(((x * p.get("s", 1.0)) @ p["w"] + p["b"] - y) ** 2)


def _whole_batch(tx, params, x, y):
    state, p = tx.init(params), params
    step = jax.jit(lambda p, s, x, y: tx.update(jax.grad(_loss)(p, x, y), s, p))
    for t in range(T):
        u, state = step(p, state, x[t], y[t])
        p = gradtx.apply_updates(p, u)
    return jax.tree.map(np.asarray, p)


def _manual_both(tx):
    """shard_map over "data" and "model": each device holds its columns of w and b and its rows of the batch;
    the loss of its rows sums the columns over "model". (Only parameters split over "model" here: under
    check_vma=True `init` types every slot as varying over the axes any parameter varies over, so a
    replicated parameter's update would vary over "model" too.)"""

    def run(p, x, y):  # x: [T, rows/4, 4]; y: [T, rows/4, 8/2]
        state = tx.init(p)
        for t in range(T):

            def loss(q, t=t):
                err = x[t] @ q["w"] + q["b"] - y[t]
                return jax.lax.psum(jnp.sum(err**2), "model") / (err.shape[0] * 8)

            grads = jax.grad(loss)(gradtx.parallel.per_replica(p, "data"))
            updates, state = tx.update(grads, state, p)
            p = gradtx.apply_updates(p, updates)
        return p

    model = {k: SPECS[k] for k in ("w", "b")}
    specs = dict(in_specs=(model, P(None, "data"), P(None, "data", "model")), out_specs=model)
    return jax.jit(jax.shard_map(run, mesh=MESH, **specs))


def _manual_data(tx):
    """jit with a shard_map over "data" only: inside it the parameters are whole arrays, sharded over
    "model" by XLA."""

    def run(p, x, y):
        state = tx.init(p)
        for t in range(T):
            grads = jax.grad(_loss)(gradtx.parallel.per_replica(p, "data"), x[t], y[t])
            updates, state = tx.update(grads, state, p)
            p = gradtx.apply_updates(p, updates)
        return p

    data = P(None, "data")
    specs = dict(in_specs=(P(), data, data), out_specs=P(), axis_names={"data"})
    return jax.jit(jax.shard_map(run, mesh=MESH, **specs))


@pytest.mark.parametrize("how", ["shard_map", "jit"])
@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_reducing_over_data_with_parameters_sharded_over_model(name, how):
    make, plain = WRAPPERS[name]
    params, x, y = _problem()
    if how == "shard_map":
        del params["s"]
    placed = {k: jax.device_put(v, NamedSharding(MESH, SPECS[k])) for k, v in params.items()}
    if how == "shard_map":
        run = _manual_both(make())
        xs = jax.device_put(x, NamedSharding(MESH, P(None, "data")))
        ys = jax.device_put(y, NamedSharding(MESH, P(None, "data", "model")))
    else:
        run = _manual_data(make())
        xs, ys = (jax.device_put(a, NamedSharding(MESH, P(None, "data"))) for a in (x, y))
    got = jax.block_until_ready(run(placed, xs, ys))
    assert got["w"].sharding.spec == P(None, "model") or how == "jit"
    expected = _whole_batch(plain(), params, x, y)
    for k in params:
        np.testing.assert_allclose(np.asarray(got[k]), expected[k], rtol=2e-5, atol=2e-6, err_msg=k)
