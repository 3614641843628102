"""A ZeRO-1 run saved on N devices resumes on M (8 -> 4 -> 8, 8 -> 1 -> 8) through `gradtx.checkpoint` and
orbax, with the numbers of one uninterrupted run of the unsharded optimizer on one device."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx import checkpoint
from gradtx.parallel import shard_state, sharded_state, unshard_state

AXIS, ROWS = "data", 32
INNER = gradtx.adam(0.05)
TX = sharded_state(INNER, AXIS)


def _loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)


def _problem(steps):
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((5, 3)).astype(np.float32), "b": np.zeros(3, np.float32)}
    batches = [
        (rng.standard_normal((ROWS, 5)).astype(np.float32), rng.standard_normal((ROWS, 3)).astype(np.float32))
        for _ in range(steps)
    ]
    return params, batches


def _mesh(n):
    return Mesh(np.array(jax.devices()[:n]), (AXIS,))


_STEPS: dict = {}


def _zero_steps(n, params, state, batches):
    """ZeRO-1 on n devices (shard_map): each device its rows, its own gradient, 1/n of Adam's state."""
    m = _mesh(n)
    if n not in _STEPS:

        def step(p, s, x, y):
            grads = jax.grad(_loss)(gradtx.parallel.per_replica(p, AXIS), x, y)
            updates, s = TX.update(grads, s, p)
            return gradtx.apply_updates(p, updates), s

        specs = dict(in_specs=(P(), P(AXIS), P(AXIS), P(AXIS)), out_specs=(P(), P(AXIS)))
        _STEPS[n] = jax.jit(jax.shard_map(step, mesh=m, **specs))
    put = lambda a, spec: jax.device_put(a, NamedSharding(m, spec))  # noqa: E731
    p, s = put(params, P()), put(state, P(AXIS))
    for x, y in batches:
        p, s = jax.block_until_ready(_STEPS[n](p, s, put(x, P(AXIS)), put(y, P(AXIS))))
    return jax.tree.map(np.asarray, p), s


def _plain_steps(params, state, batches):
    """The unsharded optimizer on one device, the whole batch."""

    @jax.jit
    def step(p, s, x, y):
        updates, s = INNER.update(jax.grad(_loss)(p, x, y), s, p)
        return gradtx.apply_updates(p, updates), s

    for x, y in batches:
        params, state = step(params, state, x, y)
    return jax.tree.map(np.asarray, params), state


def _check(params, state, ref_params, ref_state):
    for k in ref_params:
        np.testing.assert_allclose(params[k], ref_params[k], rtol=1e-5, atol=1e-6, err_msg=k)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(ref_state), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def _npz_round_trip(path, tree, like):
    checkpoint.save_npz(path, tree)
    return checkpoint.load_npz(path, like)


def _orbax_round_trip(path, tree, like):
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(path, tree)
        ckptr.wait_until_finished()
        return ckptr.restore(path, like)


@pytest.mark.parametrize(
    "devices, store",
    [((8, 4, 8), _npz_round_trip), ((8, 1, 8), _orbax_round_trip)],
    ids=["8-4-8 npz", "8-1-8 orbax"],
)
def test_a_sharded_state_restores_on_another_number_of_devices(tmp_path, devices, store):
    params, batches = _problem(7)
    like = jax.eval_shape(INNER.init, params)
    shapes = jax.eval_shape(lambda: params)
    state = jax.jit(jax.shard_map(TX.init, mesh=_mesh(devices[0]), in_specs=P(), out_specs=P(AXIS)))(params)
    p, whole = params, None
    for i, (n, part) in enumerate(zip(devices, (batches[:3], batches[3:5], batches[5:]), strict=True)):
        if i:  # restore the checkpoint saved on the previous topology, laid out for this one
            restored = store(
                tmp_path / f"ckpt{i}",
                {"params": p, "opt_state": whole},
                {"params": shapes, "opt_state": like},
            )
            p, whole = restored["params"], restored["opt_state"]
            state = shard_state(whole, n)
        if n == 1:  # one device: the unsharded optimizer itself continues
            p, whole = _plain_steps(p, whole, part)
            continue
        p, state = _zero_steps(n, p, state, part)
        assert state.inner[0].m["w"].shape == (n, -(-15 // n))  # 1/n of the slot per device
        whole = unshard_state(state, like)
    ref_params, ref_state = _plain_steps(params, INNER.init(params), batches)
    _check(p, whole, ref_params, ref_state)


def test_a_jit_sharded_state_restores_on_another_mesh(tmp_path):
    """Under jit the state keeps its leaves' shapes: orbax restores it with the shardings of the new mesh,
    and `gradtx.checkpoint`'s arrays are placed like a fresh `init` on it."""
    params, batches = _problem(6)
    states = {}
    for n in (8, 4):
        m = _mesh(n)
        tx = sharded_state(INNER, AXIS, mesh=m)
        p = jax.device_put(params, NamedSharding(m, P()))
        states[n] = (m, tx, p, tx.init(p))

    def run(n, p, s, part):
        m, tx, _, _ = states[n]

        @jax.jit
        def step(p, s, x, y):
            updates, s = tx.update(jax.grad(_loss)(p, x, y), s, p)
            return gradtx.apply_updates(p, updates), s

        put = lambda a: jax.device_put(a, NamedSharding(m, P(AXIS)))  # noqa: E731
        for x, y in part:
            p, s = jax.block_until_ready(step(p, s, put(x), put(y)))
        return p, s

    m8, _, p8, s8 = states[8]
    p, s = run(8, p8, s8, batches[:2])
    _, _, p4, fresh4 = states[4]
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), (p4, fresh4))
    p, s = _orbax_round_trip(tmp_path / "orbax", (p, s), target)  # 8 -> 4
    assert s.inner[0].m["w"].sharding.mesh.size == 4
    p, s = run(4, p, s, batches[2:4])
    p, s = jax.device_put(
        _npz_round_trip(tmp_path / "s.npz", (p, s), target), jax.tree.map(lambda t: t.sharding, (p8, s8))
    )  # 4 -> 8
    p, s = run(8, p, s, batches[4:])
    ref_params, ref_state = _plain_steps(params, INNER.init(params), batches)
    _check(
        jax.tree.map(np.asarray, p),
        unshard_state(s, jax.eval_shape(INNER.init, params)),
        ref_params,
        ref_state,
    )


def test_unshard_state_refuses_the_state_of_other_parameters():
    like = jax.eval_shape(INNER.init, {"w": jnp.zeros(20), "b": jnp.zeros(3)})
    small = shard_state(INNER.init({"w": jnp.zeros(7), "b": jnp.zeros(3)}), 4)
    with pytest.raises(
        ValueError,
        match=r"`unshard_state`: a leaf of shape \(4, 2\) cannot hold a state leaf of shape \(20,\)",
    ):
        unshard_state(small, like)
    with pytest.raises(ValueError, match=r"`shard_state`: `num_replicas` must be an int >= 1, got 0"):
        shard_state(like, 0)
