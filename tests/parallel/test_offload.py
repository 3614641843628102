"""`parallel.offloaded_state`: the state in host memory between steps, with the numbers of a state on device.

XLA:CPU has the memory kinds of an accelerator ("device", "pinned_host"), in the same RAM: these tests check
where the state is placed, that the compiled step moves it, and the numbers; what it saves on an accelerator
is measured there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx._core import lowbit
from tests import helpers


def _kinds(state):
    """Each state leaf's memory kind, by its number of dimensions: {ndim > 0: kinds, scalars: kinds}."""
    kinds = {"slots": set(), "scalars": set()}
    for x in jax.tree.leaves(state):
        kinds["slots" if x.ndim else "scalars"].add(x.sharding.memory_kind)
    return kinds


def _steps(tx, params, grads, state, n=3):
    step = jax.jit(tx.update)  # not donated: XLA:CPU aborts on a donated host buffer (JAX 0.10.2)
    for k in range(n):
        u, state = step(jax.tree.map(lambda g, k=k: g / (k + 1), grads), state, params)
    return u, state


def test_the_state_lives_in_host_memory_and_steps_as_on_the_device():
    params = {"w": jnp.linspace(-1.0, 1.0, 96).reshape(12, 8), "b": jnp.zeros(8)}
    grads = jax.tree.map(jnp.cos, params)
    plain = gradtx.adamw(1e-2, weight_decay=1e-2)
    tx = gradtx.parallel.offloaded_state(plain)
    state = tx.init(params)
    assert _kinds(state) == {"slots": {"pinned_host"}, "scalars": {"device"}}
    u, state = _steps(tx, params, grads, state)
    ref_u, ref = _steps(plain, params, grads, plain.init(params))
    assert _kinds(state) == {"slots": {"pinned_host"}, "scalars": {"device"}}
    helpers.assert_trees_close(u, ref_u, rtol=0, atol=0)
    helpers.assert_trees_close(state, ref, rtol=0, atol=0)
    assert jax.jit(tx.init)(params).inner_state[0].m["w"].sharding.memory_kind == "pinned_host"
    hlo = jax.jit(tx.update).lower(grads, state, params).compile().as_text()
    assert "S(5)" in hlo  # XLA's host memory space: the step's arguments and results there
    u, _ = tx.update(grads, tx.init(params), params)  # eagerly too
    helpers.assert_trees_close(u, plain.update(grads, plain.init(params), params)[0], rtol=0, atol=1e-7)


@pytest.mark.parametrize("axis_type", [AxisType.Auto, AxisType.Explicit])
def test_zero_one_keeps_each_devices_share_in_its_hosts_memory(axis_type):
    mesh = jax.make_mesh((8,), ("data",), axis_types=(axis_type,))
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.standard_normal((64, 32)), jnp.float32), "b": jnp.zeros(32)}
    params = jax.device_put(params, NamedSharding(mesh, P()))
    grads = jax.tree.map(jnp.sin, params)
    zero = gradtx.parallel.sharded_state(gradtx.adam(1e-2), "data", mesh=mesh)
    tx = gradtx.parallel.offloaded_state(zero)
    with jax.set_mesh(mesh):
        u, state = _steps(tx, params, grads, tx.init(params))
        ref_u, ref = _steps(zero, params, grads, zero.init(params))
    helpers.assert_trees_close(u, ref_u, rtol=0, atol=0)
    helpers.assert_trees_close(state, ref, rtol=0, atol=0)
    m, ref_m = state.inner[0].m["w"], ref.inner[0].m["w"]
    assert (
        m.sharding.memory_kind == "pinned_host" and m.sharding.spec == ref_m.sharding.spec
    )  # split over "data"
    assert _kinds(state) == {"slots": {"pinned_host"}, "scalars": {"device"}}

    target = gradtx.parallel.restore_target(tx, params, mesh)["opt_state"]  # where a restore puts it
    assert _kinds(
        jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=s.sharding), target)
    ) == {
        "slots": {"pinned_host"},
        "scalars": {"device"},
    }
    assert target.inner[0].m["w"].sharding.spec == P("data", None)


def test_low_bit_slots_are_offloaded_as_their_codes_and_scales():
    params = {"w": jnp.linspace(-1.0, 1.0, 64 * 128).reshape(64, 128)}
    grads = jax.tree.map(jnp.cos, params)
    low = gradtx.low_bit_state(gradtx.adam(1e-2), "8bit")
    tx = gradtx.parallel.offloaded_state(low)
    u, state = _steps(tx, params, grads, tx.init(params))
    ref_u, _ = _steps(low, params, grads, low.init(params))
    helpers.assert_trees_close(u, ref_u, rtol=0, atol=0)
    slot = state[0].v["w"]
    assert lowbit.is_stored(slot)
    assert {x.sharding.memory_kind for x in (slot.codes, slot.scales)} == {"pinned_host"}


def test_a_transform_is_required():
    with pytest.raises(TypeError, match=r"`offloaded_state`: `tx` must be"):
        gradtx.parallel.offloaded_state("adam")
