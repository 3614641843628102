"""`model_average`, `elastic_average` and `agn` against float64 NumPy references of their rules."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx.parallel import agn, elastic_average, model_average
from gradtx.sparse import RowSparse
from tests import catalog
from tests.parallel import _util

N, T = _util.N, 7


def _data(seed, shape=(3,)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32), rng.standard_normal((T, N, *shape)).astype(
        np.float32
    )


def _momentum(lr=0.1, mu=0.9):
    """TF's MomentumOptimizer: accum = mu * accum + g; var -= lr * accum (float64)."""

    def step(p, m, g):
        m = mu * m + g
        return p - lr * m, m

    return step


def _assert_replicas(got, ref, rtol=1e-5, atol=1e-6):
    """got: [N, T, ...]; ref: [T, N, ...]."""
    np.testing.assert_allclose(got, np.swapaxes(ref, 0, 1), rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- model_average


def _model_average_reference(p0, grads, interval):
    step = _momentum()
    p = np.repeat(p0[None].astype(np.float64), N, axis=0)
    m = np.zeros_like(p)
    out = []
    for t in range(grads.shape[0]):
        p, m = step(p, m, grads[t])
        if (t + 1) % interval == 0:
            p = np.repeat(p.mean(axis=0, keepdims=True), N, axis=0)  # the inner states stay local
        out.append(p)
    return np.asarray(out)


@pytest.mark.parametrize("mode", _util.MODES)
def test_model_average_matches_the_reference(mode):
    p0, grads = _data(0)
    got, obs = _util.run(
        model_average(gradtx.momentum(0.1, 0.9), _util.AXIS, interval_steps=3),
        p0,
        grads,
        mode=mode,
        per_replica=True,
        observe=lambda s: s.count,
    )
    _assert_replicas(got, _model_average_reference(p0, grads, 3))
    np.testing.assert_array_equal(obs[0], np.arange(1, T + 1))


def test_model_average_replicas_agree_exactly_at_the_interval_and_not_before():
    p0, grads = _data(1)
    got, _ = _util.run(
        model_average(gradtx.sgd(0.1), _util.AXIS, interval_steps=3), p0, grads, mode="vma", per_replica=True
    )
    for t in range(T):
        spread = np.ptp(got[:, t], axis=0).max()
        if (t + 1) % 3 == 0:
            np.testing.assert_allclose(
                got[:, t],
                np.broadcast_to(got[0, t], got[:, t].shape),
                rtol=1e-7,
                atol=1e-7,
                err_msg=f"step {t + 1}",
            )
        else:
            assert spread > 1e-3, f"step {t + 1}: the replicas should still differ"


def test_model_average_with_row_sparse_gradients():
    """Local steps touch only the gradient's rows (Adagrad's sparse rule); the average touches all."""
    table = np.random.default_rng(2).standard_normal((6, 2)).astype(np.float32)
    idx = np.tile(np.array([[[0, 1]], [[2, 3]]], np.int32), (1, N, 1))  # step 1 rows 0, 1; step 2 rows 2, 3
    vals = np.random.default_rng(3).standard_normal((2, N, 2, 2)).astype(np.float32)
    tx = model_average(gradtx.adagrad(0.1), _util.AXIS, interval_steps=2)
    got, _ = _util.run(
        tx,
        {"t": table},
        {"i": idx, "v": vals},
        mode="novma",
        per_replica=True,
        grad_fn=lambda p, d: {"t": RowSparse(d["i"], d["v"], (6, 2))},
    )
    got = got["t"]
    np.testing.assert_array_equal(got[:, 0, 2:], np.broadcast_to(table[2:], (N, 4, 2)))
    assert np.ptp(got[:, 0, :2], axis=0).max() > 1e-3
    # rows no replica touched: averaged copies of equal values (equal up to the rounding of the mean)
    np.testing.assert_allclose(got[:, 1, 4:], np.broadcast_to(table[4:], (N, 2, 2)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[:, 1], np.broadcast_to(got[0, 1], (N, 6, 2)), rtol=1e-7, atol=1e-7)


# --------------------------------------------------------------------------- elastic_average


def _elastic_reference(p0, grads, period, alpha, rho, lr=0.1):
    p = np.repeat(p0[None].astype(np.float64), N, axis=0)
    center = local_center = p0.astype(np.float64)
    out, centers = [], []
    for t in range(grads.shape[0]):
        p = p - lr * (grads[t] + rho * (p - local_center))
        if (t + 1) % period == 0:
            d = p - center
            p = p - alpha * d
            local_center, center = center, center + alpha * d.sum(axis=0)
        out.append(p)
        centers.append(center)
    return np.asarray(out), np.asarray(centers)


EXPLICIT = ({"moving_rate": 0.05, "rho": 0.3}, 0.05, 0.3)
TF_DEFAULTS = (
    {"learning_rate": 0.1},
    0.9 / 2 / N,
    0.9 / 2 / N / 0.1,
)  # TF: rho = moving_rate / learning_rate
NO_RHO = ({"rho": 0.0}, 0.9 / 2 / N, 0.0)


@pytest.mark.parametrize(
    "mode, case",
    [("vma", EXPLICIT), ("novma", EXPLICIT), ("pmap", EXPLICIT), ("vma", TF_DEFAULTS), ("novma", NO_RHO)],
    ids=["vma-explicit", "novma-explicit", "pmap-explicit", "vma-tf-defaults", "novma-no-rho"],
)
def test_elastic_average_matches_the_reference(mode, case):
    kwargs, alpha, rho = case
    p0, grads = _data(4)
    tx = elastic_average(gradtx.sgd(0.1), _util.AXIS, communication_period=2, **kwargs)
    got, centers = _util.run(tx, p0, grads, mode=mode, per_replica=True, observe=lambda s: s.global_center)
    ref, ref_centers = _elastic_reference(p0, grads, 2, alpha, rho)
    _assert_replicas(got, ref)
    np.testing.assert_allclose(centers[0], ref_centers, rtol=1e-5, atol=1e-6)


def test_elastic_average_accepts_schedules():
    p0, grads = _data(5)
    tx = elastic_average(gradtx.sgd(0.1), _util.AXIS, 2, moving_rate=lambda c: 0.05, rho=lambda c: 0.3)
    got, _ = _util.run(tx, p0, grads, mode="novma", per_replica=True)
    _assert_replicas(got, _elastic_reference(p0, grads, 2, 0.05, 0.3)[0])


def test_model_average_with_tf_step_numbers():
    """TF's inner optimizer has no step of its own: a schedule on TF's global_step sees the number of
    averages done, which `count // interval_steps` gives the inner transform."""
    p0, grads = _data(7)
    k = 3

    def decayed(gs):  # a TF1-style decay of global_step
        return 0.1 * 0.5**gs

    tx = model_average(gradtx.sgd(lambda count: decayed(count // k)), _util.AXIS, interval_steps=k)
    got, _ = _util.run(tx, p0, grads, mode="novma", per_replica=True)
    p = np.repeat(p0[None].astype(np.float64), N, axis=0)  # float64: TF's rule, its global step
    global_step, ref = 0, []
    for t in range(T):
        p = p - decayed(global_step) * grads[t]
        if (t + 1) % k == 0:
            p, global_step = np.repeat(p.mean(axis=0, keepdims=True), N, axis=0), global_step + 1
        ref.append(p)
    _assert_replicas(got, np.asarray(ref))


# --------------------------------------------------------------------------- one device on the whole batch


def _regression(seed):
    rng = np.random.default_rng(seed)
    params = {"w": rng.standard_normal((4, 2)).astype(np.float32), "b": np.zeros(2, np.float32)}
    data = {
        "x": rng.standard_normal((T, N, 3, 4)).astype(np.float32),
        "y": rng.standard_normal((T, N, 3, 2)).astype(np.float32),
    }
    return params, data


def _regression_loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)


def _whole_batch(tx, params, data):
    """One device, every step on all replicas' rows (the reference of synchronous data parallelism)."""
    step = jax.jit(
        lambda p, s, x, y: (lambda u, s: (gradtx.apply_updates(p, u), s))(
            *tx.update(jax.grad(_regression_loss)(p, x, y), s, p)
        )
    )
    state, out = tx.init(params), []
    for t in range(T):
        params, state = step(params, state, data["x"][t].reshape(-1, 4), data["y"][t].reshape(-1, 2))
        out.append(jax.tree.map(np.asarray, params))
    return out


@pytest.mark.parametrize(
    "make, inner",
    [
        (lambda tx: agn(tx, _util.AXIS, communication_period=1), lambda: gradtx.adam(0.05)),
        (lambda tx: model_average(tx, _util.AXIS, interval_steps=1), lambda: gradtx.momentum(0.1, 0.9)),
    ],
    ids=["agn(adam)", "model_average(momentum)"],
)
def test_communicating_every_step_is_the_whole_batch_step(make, inner):
    """AGN with period 1 is `tx` on the replicas' mean gradient (one center step per period, all replicas
    at once); model averaging every step with a linear rule (momentum) is the whole-batch step too."""
    params, data = _regression(8)
    got, _ = _util.run(
        make(inner()),
        params,
        data,
        mode="vma",
        per_replica=True,
        grad_fn=lambda p, d: jax.grad(_regression_loss)(p, d["x"], d["y"]),
    )
    for t, expected in enumerate(_whole_batch(inner(), params, data)):
        for k in params:
            np.testing.assert_allclose(
                got[k][:, t], np.broadcast_to(expected[k], got[k][:, t].shape), rtol=2e-5, atol=2e-6
            )


# --------------------------------------------------------------------------- agn


def _agn_reference(p0, grads, period):
    step = _momentum()
    p = np.repeat(p0[None].astype(np.float64), N, axis=0)
    m, acc = np.zeros_like(p), np.zeros_like(p)
    center, center_m = p0.astype(np.float64), np.zeros_like(p0, np.float64)
    out = []
    for t in range(grads.shape[0]):
        p, m = step(p, m, grads[t])
        acc = acc + grads[t]
        if (t + 1) % period == 0:
            center, center_m = step(center, center_m, (acc / period).mean(axis=0))
            p, acc = np.repeat(center[None], N, axis=0), np.zeros_like(acc)
        out.append(p)
    return np.asarray(out)


@pytest.mark.parametrize("mode", _util.MODES)
def test_agn_matches_the_synchronous_rule(mode):
    """Several local steps per period: each replica's local momentum steps (TF's worker), then one center
    step with the mean of the normalized sums (the documented synchronous rule; TF's asynchronous workers
    would take one center step each)."""
    p0, grads = _data(6)
    got, _ = _util.run(
        agn(gradtx.momentum(0.1, 0.9), _util.AXIS, communication_period=3),
        p0,
        grads,
        mode=mode,
        per_replica=True,
    )
    _assert_replicas(got, _agn_reference(p0, grads, 3))


def test_agn_with_one_replica_reproduces_tf_test_numbers():
    """TF's agn_optimizer_test.test1Workers2Period: Adam(0.1, beta1=0, beta2=0), gradients -1, period 4; after
    each pull the local variables equal the center exactly (TF's assertAllEqual), not up to a rounding."""
    params = {"v0": np.float32(0.0), "v1": np.float32(0.5)}
    grads = {k: -np.ones((8, 1), np.float32) for k in params}
    tx = agn(gradtx.adam(0.1, b1=0.0, b2=0.0), "w", communication_period=4)
    mesh = _util.mesh((1,), ("w",))
    got, centers = _util.run(
        tx,
        params,
        grads,
        mode="novma",
        per_replica=True,
        axis="w",
        mesh_=mesh,
        observe=lambda s: s.global_center,
    )
    np.testing.assert_allclose(got["v0"][0], [0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.4, 0.2], atol=1e-6)
    np.testing.assert_allclose(got["v1"][0], [0.6, 0.7, 0.8, 0.6, 0.7, 0.8, 0.9, 0.7], atol=1e-6)
    for k in params:
        for t in (3, 7):  # the pulls (steps 4 and 8): the variable is the center, bit for bit
            np.testing.assert_array_equal(got[k][0][t], centers[k][0][t])
    np.testing.assert_array_equal(got["v0"][0][3], np.float32(0.1))  # the center: one Adam step of 0.1


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "make",
    [
        lambda: model_average(gradtx.sgd(0.1), _util.AXIS),
        lambda: elastic_average(gradtx.sgd(0.1), _util.AXIS, learning_rate=0.1),
        lambda: agn(gradtx.sgd(0.1), _util.AXIS),
    ],
    ids=["model_average", "elastic_average", "agn"],
)
def test_local_step_wrappers_refuse_gradients_summed_by_autodiff(make):
    """check_vma=True with a replicated parameter: the gradient is the sum, not this replica's own."""
    data = np.ones((1, N, 2), np.float32)
    with pytest.raises(ValueError, match=r"needs each replica's own gradient.*jax.lax.pcast"):
        _util.run(
            make(),
            np.zeros(2, np.float32),
            data,
            mode="vma",
            grad_fn=lambda p, d: jax.grad(lambda p: jnp.sum(p * d))(p),
        )


_LOCAL = {
    **{e.name: (lambda e=e: e.build(), e.extra) for e in catalog.entries("optimizer")},
    "chain(clip, momentum)": (
        lambda: gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.momentum(0.1, 0.9)),
        None,
    ),
    "model_average(adam)": (lambda: model_average(gradtx.adam(0.1), _util.AXIS, 2), None),
    "elastic_average": (lambda: elastic_average(gradtx.sgd(0.1), _util.AXIS, 2, rho=0.05), None),
    "agn(rmsprop)": (lambda: agn(gradtx.rmsprop(0.1), _util.AXIS, 2), None),
}


_WRAPPERS = {"model_average(adam)", "elastic_average", "agn(rmsprop)"}


@pytest.mark.parametrize("name", sorted(_LOCAL))
def test_state_of_per_replica_params_keeps_its_type_under_check_vma(name):
    """Local steps under check_vma=True: `init` types the state as varying like the params, so the
    state carried through `lax.scan` has the same type before and after `update`."""
    make, extra = _LOCAL[name]
    tx = make()
    m = _util.mesh()

    def body(p):  # this replica's parameters: varying over the axis
        p = {"w": p[0], "b": p[0, :2]}

        def step(carry, t):
            params, state = carry
            grads = jax.tree.map(lambda x: jnp.sin(x) + 0.5, params)
            updates, state = tx.update(grads, state, params, **(extra(0) if extra else {}))
            return (gradtx.apply_updates(params, updates), state), None

        (p, _), _ = jax.lax.scan(step, (p, tx.init(p)), jnp.arange(3))
        return p["w"][None]

    rows = np.linspace(0.5, 1.5, 6, dtype=np.float32) + 0.1 * np.arange(N, dtype=np.float32)[:, None]
    out = jax.jit(jax.shard_map(body, mesh=m, in_specs=P(_util.AXIS), out_specs=P(_util.AXIS)))(
        _util.put(rows, m, P(_util.AXIS))
    )
    out = np.asarray(jax.block_until_ready(out))
    if name in _WRAPPERS:  # the same wrapper, untyped (check_vma=False): the typing changes no number
        ref = jax.jit(
            jax.shard_map(body, mesh=m, in_specs=P(_util.AXIS), out_specs=P(_util.AXIS), check_vma=False)
        )(_util.put(rows, m, P(_util.AXIS)))
    else:  # local steps of a plain optimizer: each replica is one device with its own parameters
        ref = jax.jit(jax.vmap(lambda p: body(p[None])[0]))(rows)
    # GGT's tail divides round-off by 1e-3 (helpers.GGT_TOLERANCE); over 3 steps of vmap vs shard_map: 1e-4
    tol = {"rtol": 1e-4, "atol": 1e-4} if name == "ggt" else {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(out, np.asarray(jax.block_until_ready(ref)), **tol)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: model_average(gradtx.sgd(0.1), "batch"), "model_average"),
        (lambda: elastic_average(gradtx.sgd(0.1), "batch", rho=0.1), "elastic_average"),
        (lambda: agn(gradtx.sgd(0.1), "batch"), "agn"),
    ],
)
def test_local_step_wrappers_raise_outside_the_axis_and_without_params(make, name):
    tx = make()
    p = jnp.zeros(2)
    with pytest.raises(ValueError, match=rf"`{name}`: the axis name 'batch' is not bound"):
        tx.update(jnp.ones(2), tx.init(p), p)
    with pytest.raises(ValueError, match=rf"`{name}`: `update` needs the current parameters"):
        tx.update(jnp.ones(2), tx.init(p))


def test_construction_errors():
    with pytest.raises(ValueError, match=r"`model_average`: `interval_steps` must be >= 1, got 0"):
        model_average(gradtx.sgd(0.1), "i", 0)
    with pytest.raises(TypeError, match=r"`agn`: `communication_period` must be an integer"):
        agn(gradtx.sgd(0.1), "i", 2.0)
    with pytest.raises(ValueError, match=r"`elastic_average`: `moving_rate` must be >= 0, got -0.1"):
        elastic_average(gradtx.sgd(0.1), "i", moving_rate=-0.1, rho=0.1)
    with pytest.raises(
        ValueError,
        match=r"`elastic_average`: TF's default `rho` is `moving_rate / learning_rate`.*"
        r"pass `learning_rate=`.*`rho=0.0` for no elastic term",
    ):
        elastic_average(gradtx.sgd(0.1), "i")
    with pytest.raises(ValueError, match=r"`elastic_average`: `rho` must be finite"):
        elastic_average(gradtx.sgd(0.1), "i", rho=float("inf"))
    with pytest.raises(ValueError, match=r"`elastic_average`: `learning_rate` must be > 0, got 0.0"):
        elastic_average(gradtx.sgd(0.1), "i", learning_rate=0.0)
    with pytest.raises(TypeError, match=r"`elastic_average`: `tx` must be a gradient transformation"):
        elastic_average("sgd", "i")
