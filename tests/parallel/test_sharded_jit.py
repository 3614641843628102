"""`sharded_state(tx, "data", mesh=mesh)` under plain `jax.jit` (no shard_map): ZeRO-1 through shardings.
The slots are split over "data", the updates come back replicated, and the numbers are the unsharded
optimizer's in the same jitted step -- for per-tensor and global-norm rules too, which XLA computes on
the sharded tensors."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from benchmarks.sharding import count
from gradtx.parallel import sharded_state

N = 8
INNER = {
    "adam": lambda: gradtx.adam(0.05),
    "lars": lambda: gradtx.lars(0.5, weight_decay=1e-3),
    "clip+adam": lambda: gradtx.chain(gradtx.clip_by_global_norm(0.05), gradtx.adam(0.05)),
}


def _mesh(kind):
    if kind == "auto":
        return Mesh(np.array(jax.devices()[:N]), ("data",))  # auto axes
    return jax.make_mesh((N,), ("data",))  # explicit axes (jax.make_mesh's default)


def _loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] - y) ** 2)


def _problem(mesh, kind):
    rng = np.random.default_rng(0)
    shapes = {"w1": (6, 16), "b1": (16,), "w2": (16, 3)}  # split on dimension 1, 0 and 0
    params = {k: (0.5 * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()}
    params["odd"] = np.ones(5, np.float32)  # divides by nothing: stays replicated
    full = kind == "explicit"  # explicit axes: jit returns P(None, None), auto axes: P()
    rep = {k: jax.device_put(v, NamedSharding(mesh, P(*([None] * v.ndim * full)))) for k, v in params.items()}
    batches = [
        tuple(
            jax.device_put(a, NamedSharding(mesh, P("data")))
            for a in (rng.standard_normal((32, 6)).astype(np.float32), rng.standard_normal((32, 3)))
        )
        for _ in range(3)
    ]
    return rep, batches


def _step(tx):
    def step(p, s, x, y):
        grads = jax.grad(lambda q: _loss(q, x, y) + jnp.sum(q["odd"] ** 2))(p)
        updates, s = tx.update(grads, s, p)
        return gradtx.apply_updates(p, updates), s

    return jax.jit(step)


@pytest.mark.parametrize(
    "kind, name", [("auto", "adam"), ("explicit", "adam"), ("auto", "lars"), ("explicit", "clip+adam")]
)
def test_zero1_under_jit_equals_the_unsharded_optimizer(kind, name):
    mesh = _mesh(kind)
    params, batches = _problem(mesh, kind)
    tx = sharded_state(INNER[name](), "data", mesh=mesh)
    ref_tx = INNER[name]()
    with jax.set_mesh(mesh):
        step, ref_step = _step(tx), _step(ref_tx)
        p, s = params, tx.init(params)
        rp, rs = params, ref_tx.init(params)
        for x, y in batches:
            p, s = jax.block_until_ready(step(p, s, x, y))
            rp, rs = jax.block_until_ready(ref_step(rp, rs, x, y))
        assert step._cache_size() == 1  # init's shardings are update's: one compilation
        hlo = step.lower(p, s, *batches[0]).compile().as_text()
        ref_hlo = ref_step.lower(rp, rs, *batches[0]).compile().as_text()
    for k in params:
        np.testing.assert_allclose(np.asarray(p[k]), np.asarray(rp[k]), rtol=2e-6, atol=1e-7, err_msg=k)
        assert p[k].sharding.is_fully_replicated, k  # the updates are gathered back
    slots = [x for x in jax.tree.leaves(s) if x.ndim and x.shape[0] % N == 0 and x.size > 1]
    assert slots and all(x.addressable_shards[0].data.size * N == x.size for x in slots)  # 1/N per device
    odd = [x for x in jax.tree.leaves(s) if x.shape == (5,)]
    assert all(x.sharding.is_fully_replicated for x in odd)
    # The gradients are reduced once (XLA:CPU keeps an all-reduce and slices it; on TPU and GPU the slice
    # makes it a reduce-scatter): no more elements all-reduced than in the unsharded step, whose norms are
    # local where the sharded step all-reduces a scalar per norm; the all-gather of the updates is added.
    assert count(hlo)["all-gather"] >= 1
    assert _all_reduced_elements(hlo) <= _all_reduced_elements(ref_hlo) + 8, (count(hlo), count(ref_hlo))


def _all_reduced_elements(hlo: str) -> int:
    """How many elements the all-reduces of a compiled HLO module reduce (each output of each one)."""
    total = 0
    for types in re.findall(r"= (\(.*?\)|\S+) all-reduce(?:-start)?\(", hlo):
        for dims in re.findall(r"\[([\d,]*)\]", types):
            total += math.prod(int(d) for d in dims.split(",") if d)
    return total


def test_zero1_under_jit_on_a_model_sharded_mesh_keeps_the_model_sharding():
    """On a ("data", "model") mesh of explicit axes: a kernel sharded over "model" has slots sharded over
    both; numbers equal the unsharded optimizer."""
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    rng = np.random.default_rng(1)

    def put(a, *spec):
        return jax.device_put(np.asarray(a, np.float32), NamedSharding(mesh, P(*spec)))

    params = {
        "w1": put(rng.standard_normal((8, 16)), None, "model"),
        "b1": put(np.zeros(16), "model"),
        "w2": put(rng.standard_normal((16, 3)), "model", None),
        "odd": put(np.ones(5), None),
    }
    x, y = (
        put(rng.standard_normal((32, 8)), "data", None),
        put(rng.standard_normal((32, 16)), "data", "model"),
    )

    def step_of(tx):
        def step(p, s, x, y):
            def loss(q):  # no contraction over "model": explicit axes would ask where its result goes
                h = jnp.tanh(x @ q["w1"] + q["b1"])
                return jnp.mean((h - y) ** 2) + jnp.sum(q["w2"] ** 2) + jnp.sum(q["odd"] ** 2)

            updates, s = tx.update(jax.grad(loss)(p), s, p)
            return gradtx.apply_updates(p, updates), s

        return jax.jit(step)

    tx, ref_tx = sharded_state(gradtx.adam(0.05), "data", mesh=mesh), gradtx.adam(0.05)
    with jax.set_mesh(mesh):
        p, s = jax.block_until_ready(step_of(tx)(params, tx.init(params), x, y))
        rp, _ = jax.block_until_ready(step_of(ref_tx)(params, ref_tx.init(params), x, y))
    m = s.inner[0].m
    assert tuple(m["w1"].sharding.spec) == ("data", "model")
    assert tuple(m["b1"].sharding.spec) == (("model", "data"),)
    assert tuple(m["w2"].sharding.spec) == (("model", "data"), None)
    for k in params:
        assert p[k].sharding.spec == params[k].sharding.spec, k
        np.testing.assert_allclose(np.asarray(p[k]), np.asarray(rp[k]), rtol=2e-6, atol=1e-7, err_msg=k)
