"""End to end: an MLP on the digits data set, data-parallel on 8 devices with `cross_shard` under
`jax.shard_map`, trains like one device with the same global batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
from tests.parallel import _util

STEPS, BATCH = 150, 64


def _data():
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def _init(rng):
    return {
        "w1": (rng.standard_normal((64, 32)) / 8).astype(np.float32),
        "b1": np.zeros(32, np.float32),
        "w2": (rng.standard_normal((32, 10)) / np.sqrt(32)).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }


def _logits(p, x):
    return jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def _loss(p, x, y):
    logp = jax.nn.log_softmax(_logits(p, x))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def _batches(x, y):
    rng = np.random.default_rng(1)
    idx = np.stack([rng.choice(len(x), BATCH, replace=False) for _ in range(STEPS)])
    return x[idx], y[idx]


def _accuracy(p, x, y):
    return float(np.mean(np.argmax(np.asarray(_logits(p, x)), axis=1) == y))


@pytest.mark.slow
def test_data_parallel_digits_mlp_trains_like_one_device():
    (x, y), (x_test, y_test) = _data()
    xb, yb = _batches(x, y)
    params0 = _init(np.random.default_rng(2))

    # one device, the global batch of 64 (the training loop is a `lax.scan`: one execution)
    tx = gradtx.adam(0.01)

    def single_step(carry, batch):
        p, s = carry
        value, g = jax.value_and_grad(_loss)(p, *batch)
        u, s = tx.update(g, s, p)
        return (gradtx.apply_updates(p, u), s), value

    (single_params, _), single_losses = jax.jit(lambda p, s: jax.lax.scan(single_step, (p, s), (xb, yb)))(
        params0, tx.init(params0)
    )

    # 8 devices, 8 examples of each global batch per device; cross_shard under shard_map (check_vma=True)
    mesh = _util.mesh()
    ptx = gradtx.parallel.cross_shard(gradtx.adam(0.01), _util.AXIS)

    def parallel_step(carry, batch):
        p, s = carry
        value, g = jax.value_and_grad(_loss)(gradtx.parallel.per_replica(p, _util.AXIS), *batch)
        u, s = ptx.update(g, s, p)
        return (gradtx.apply_updates(p, u), s), jax.lax.pmean(value, _util.AXIS)

    batches = P(None, _util.AXIS)  # [step, example]: the examples of every step split over the devices

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P(), P(), batches, batches), out_specs=(P(), P()))
    def parallel_train(p, s, xb, yb):
        (p, _), losses = jax.lax.scan(parallel_step, (p, s), (xb, yb))
        return p, losses

    parallel_params, parallel_losses = parallel_train(
        params0, ptx.init(params0), *_util.put((xb, yb), mesh, batches)
    )
    parallel_params = jax.tree.map(np.asarray, parallel_params)
    single_losses, parallel_losses = np.asarray(single_losses), np.asarray(parallel_losses)

    np.testing.assert_allclose(parallel_losses, single_losses, rtol=1e-4, atol=1e-5)
    assert np.mean(parallel_losses[-10:]) < 0.25 * np.mean(parallel_losses[:10])
    single_acc = _accuracy(single_params, x_test, y_test)
    parallel_acc = _accuracy(parallel_params, x_test, y_test)
    assert parallel_acc >= 0.9, parallel_acc
    assert abs(parallel_acc - single_acc) <= 0.01, (parallel_acc, single_acc)
    for k in params0:
        np.testing.assert_allclose(
            parallel_params[k], np.asarray(single_params[k]), rtol=1e-3, atol=1e-5, err_msg=k
        )
