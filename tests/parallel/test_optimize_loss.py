"""`optimize_loss(..., axis_name=...)` is CrossShardOptimizer inside TF's optimize_loss: each replica clips,
multiplies and adds noise to its gradient of loss / N, and the results are summed -- against a float64
NumPy simulation of TF's order."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from tests.parallel import _util

N, B, STEPS = _util.N, 4, 3


def _loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)


def _problem():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((3, 2)).astype(np.float32), "b": np.zeros(2, np.float32)}
    x = rng.standard_normal((N * B, 3)).astype(np.float32) * np.repeat(np.linspace(0.2, 3.0, N), B)[:, None]
    y = rng.standard_normal((N * B, 2)).astype(np.float32)
    return params, x.astype(np.float32), y


def _tf_reference(params, x, y, *, lr, clip, multipliers):
    """TF: CrossShardOptimizer.compute_gradients scales each shard's loss by 1/N; optimize_loss multiplies
    and clips (by the global norm) what it returns, per shard; apply_gradients sums over the shards."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    norms = []
    for _ in range(STEPS):
        total = {k: np.zeros_like(v) for k, v in p.items()}
        step_norms = []
        for r in range(N):
            xr, yr = x[r * B : (r + 1) * B].astype(np.float64), y[r * B : (r + 1) * B].astype(np.float64)
            err = xr @ p["w"] + p["b"] - yr
            g = {"w": 2 * xr.T @ err / err.size, "b": 2 * err.sum(axis=0) / err.size}
            g = {k: v / N * multipliers.get(k, 1.0) for k, v in g.items()}
            norm = np.sqrt(sum(np.sum(v**2) for v in g.values()))
            step_norms.append(norm)
            g = {k: v * clip / max(norm, clip) for k, v in g.items()}
            total = {k: total[k] + g[k] for k in total}
        p = {k: p[k] - lr * total[k] for k in p}
        norms.append(np.mean(step_norms))
    return p, np.asarray(norms), np.asarray(step_norms)


def _run(trainer, params, x, y, mode):
    m = _util.mesh((N,), ("data",))
    specs = dict(mesh=m, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()))
    if mode == "pmap":
        step = jax.pmap(trainer.step, axis_name="data", in_axes=(None, 0, 0), out_axes=None)
        xs, ys = x.reshape(N, B, -1), y.reshape(N, B, -1)
    else:
        step = jax.jit(jax.shard_map(trainer.step, check_vma=mode == "vma", **specs))
        xs, ys = (jax.device_put(a, NamedSharding(m, P("data"))) for a in (x, y))
    state, norms = trainer.init(jax.tree.map(jnp.asarray, params)), []
    for _ in range(STEPS):
        state, metrics = jax.block_until_ready(step(state, xs, ys))
        norms.append(float(np.asarray(metrics["global_gradient_norm"]).reshape(-1)[0]))
    return jax.tree.map(np.asarray, state.params), np.asarray(norms)


@pytest.mark.parametrize("mode", ["vma", "novma", "pmap"])
def test_clipping_and_multipliers_see_each_replicas_gradient_of_loss_over_n(mode):
    """One clip threshold that binds for some replicas only: the clip must see the replica's 1/N-scaled
    gradient (clipping the unscaled one and dividing after the sum differed by up to 0.75)."""
    params, x, y = _problem()
    kwargs = dict(lr=0.5, clip=0.15, multipliers={"b": 3.0})
    ref, ref_norms, last_norms = _tf_reference(params, x, y, **kwargs)
    assert np.sum(last_norms > kwargs["clip"]) not in (0, N)  # the clip binds for some replicas, not all
    trainer = gradtx.optimize_loss(
        _loss,
        "SGD",
        learning_rate=kwargs["lr"],
        clip_gradients=kwargs["clip"],
        gradient_multipliers=kwargs["multipliers"],
        axis_name="data",
    )
    got, norms = _run(trainer, params, x, y, mode)
    for k in params:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(norms, ref_norms, rtol=1e-5)  # the metric: the replicas' mean of their norms


def test_each_replica_adds_its_own_noise_to_its_scaled_gradient():
    """A parameter the loss ignores gets noise only: each replica draws its own truncated normal, so the
    summed step has sqrt(N) times the noise scale (the same draw everywhere would give N times)."""
    params, x, y = _problem()
    params["z"] = np.zeros(4096, np.float32)
    scale = 0.01
    trainer = gradtx.optimize_loss(
        _loss, "SGD", learning_rate=1.0, gradient_noise_scale=scale, axis_name="data", summaries=["loss"]
    )
    m = _util.mesh((N,), ("data",))
    step = jax.jit(
        jax.shard_map(trainer.step, mesh=m, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()))
    )
    xs, ys = (jax.device_put(a, NamedSharding(m, P("data"))) for a in (x, y))
    state, _ = jax.block_until_ready(step(trainer.init(jax.tree.map(jnp.asarray, params)), xs, ys))
    z = np.asarray(state.params["z"])
    truncated_std = 0.87962566  # the standard deviation of N(0, 1) truncated to [-2, 2]
    assert np.std(z) == pytest.approx(scale * truncated_std * np.sqrt(N), rel=0.05)
    assert np.abs(z).max() <= 2 * scale * N
