"""Low-bit state on a mesh: placed like its parameter, under ZeRO-1, packed, through orbax on fewer devices.

A slot's codes and scales (8 and 4 bits) keep the parameter's leading axes, so they take its sharding;
the bfloat16 formats' values (and correction) are shaped like the parameter, their key is replicated.
The 2-D mesh is the suite's 8 simulated CPU devices as (4, 2).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
import gradtx.optax_compat
from gradtx._core import lowbit, slot_formats
from tests import helpers

FORMATS = ["8bit", "4bit", "bf16+sr", "bf16+8"]


def _tx(fmt):
    return gradtx.low_bit_state(gradtx.optax_compat.adamw(1e-2, weight_decay=1e-2), fmt)


def _params():
    rng = np.random.default_rng(0)
    return {"w": jnp.asarray(rng.standard_normal((64, 512)), jnp.float32), "b": jnp.zeros(8)}


def _mesh(explicit):
    devices = np.array(jax.devices()[:8]).reshape(4, 2)
    return Mesh(
        devices, ("data", "model"), axis_types=(AxisType.Explicit if explicit else AxisType.Auto,) * 2
    )


def _placed(tree, mesh):
    specs = {"w": P("data", "model"), "b": P()}
    return {k: jax.device_put(v, NamedSharding(mesh, specs[k])) for k, v in tree.items()}


def _stored_specs(slot):
    """The specs of a stored slot's arrays: parameter-shaped ones (codes, values) and the rest."""
    return [(x.ndim, tuple(x.sharding.spec)) for x in jax.tree.leaves(slot)]


@pytest.mark.parametrize(
    ("fmt", "explicit"),
    [("8bit", False), ("bf16+8", False), ("4bit", True), ("bf16+sr", True), ("8bit", True)],
)
def test_slots_are_placed_like_their_parameter_and_steps_equal_one_devices(fmt, explicit):
    mesh = _mesh(explicit)
    tx, params = _tx(fmt), _params()
    grads = jax.tree.map(jnp.cos, params)
    ref_u, ref_s = jax.jit(tx.update)(grads, tx.init(params), params)
    with jax.set_mesh(mesh):
        placed, placed_grads = _placed(params, mesh), _placed(grads, mesh)
        state = tx.init(placed)
        u, state = jax.jit(tx.update)(placed_grads, state, placed)
    for slot in (state[0].mu["w"], state[0].nu["w"]):
        assert lowbit.is_stored(slot)
        for ndim, spec in _stored_specs(slot):  # codes, scales, values: rows on "data", the rest on "model"
            assert spec == ("data", "model") if ndim == 2 else not any(spec), (fmt, spec)  # a key: replicated
    assert tuple(u["w"].sharding.spec) == ("data", "model")
    helpers.assert_trees_close(u, ref_u, rtol=0, atol=1e-7)
    helpers.assert_trees_close(gradtx.get_slot(state, "nu"), gradtx.get_slot(ref_s, "nu"), rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("fmt", "shape", "spec", "gathers"),
    [
        ("8bit", (4096, 64), P("data", None), 0),  # a device's rows hold whole blocks: local
        ("4bit", (4096, 64), P("data", "model"), 2),  # each moment gathered over "model" to flatten its rows
        ("8bit", (1000, 100), P("data", None), 2),  # a device's 25,000 elements end inside a block
    ],
)
def test_slots_whose_blocks_run_across_rows_are_placed_under_explicit_axes(fmt, shape, spec, gathers):
    # rows shorter than a block: the flattened parameter is blocked, which Explicit axes must be told where
    mesh = _mesh(True)
    tx = _tx(fmt)
    params = {"e": jnp.linspace(-1.0, 1.0, math.prod(shape)).reshape(shape)}
    grads = jax.tree.map(lambda p: jnp.sin(7.0 * p), params)
    ref_u, ref_s = jax.jit(tx.update)(grads, tx.init(params), params)
    with jax.set_mesh(mesh):
        placed, placed_grads = (
            {"e": jax.device_put(t["e"], NamedSharding(mesh, spec))} for t in (params, grads)
        )
        state = jax.jit(tx.init)(placed)
        step = jax.jit(tx.update)
        u, state = step(placed_grads, state, placed)
        hlo = step.lower(placed_grads, state, placed).compile().as_text()
    for slot in (state[0].mu["e"], state[0].nu["e"]):
        assert slot.codes.sharding.spec[0] == "data", slot.codes.sharding.spec  # the parameter's rows
    assert tuple(u["e"].sharding.spec) == tuple(spec)
    assert sum(helpers.collectives_by_scope(hlo).values()) == gathers
    helpers.assert_trees_close(u, ref_u, rtol=0, atol=1e-7)
    helpers.assert_trees_close(gradtx.get_slot(state, "nu"), gradtx.get_slot(ref_s, "nu"), rtol=0, atol=1e-9)


@pytest.mark.parametrize("fmt", ["8bit", "4bit"])
def test_a_jitted_init_and_a_restore_target_place_new_slots_like_their_parameter_under_auto_axes(fmt):
    # a new slot's codes and scales are zeros, made from the quantized slot so that GSPMD places them as it
    # (replicated before: every device held the whole slot until the first step moved it)
    mesh = _mesh(False)
    specs = {"w": P("data", "model"), "e": P("data", None)}  # "e": rows shorter than a block
    shapes = {"w": (64, 512), "e": (1000, 100)}
    params = {
        k: jax.ShapeDtypeStruct(shapes[k], jnp.float32, sharding=NamedSharding(mesh, specs[k])) for k in specs
    }
    target = gradtx.parallel.restore_target(_tx(fmt), params, mesh)["opt_state"]
    for name, want in (("w", ("data", "model")), ("e", ("data",))):
        codes = target[0].mu[name].codes
        assert tuple(codes.sharding.spec) == want, (name, codes.sharding.spec)


@pytest.mark.parametrize("fmt", ["8bit", "bf16+8"])
def test_zero_one_shards_low_bit_state_under_jit_and_in_shard_map(fmt):
    tx, params = _tx(fmt), _params()
    grads = jax.tree.map(jnp.cos, params)
    ref_u, _ = tx.update(grads, tx.init(params), params)
    mesh = _mesh(False)
    zero = gradtx.parallel.sharded_state(tx, "data", mesh=mesh)
    placed, placed_grads = _placed(params, mesh), _placed(grads, mesh)
    u, state = jax.jit(zero.update)(placed_grads, zero.init(placed), placed)
    helpers.assert_trees_close(u, ref_u, rtol=0, atol=1e-7)
    stored = [x for x in jax.tree.leaves(state, is_leaf=lowbit.is_stored) if lowbit.is_stored(x)]
    assert len(stored) == (2 if fmt == "8bit" else 4)  # 8 bits: "b" is under 4,096 elements
    for slot in stored:  # split over "data"
        assert all(x.sharding.spec[0] == "data" for x in jax.tree.leaves(slot) if x.ndim == 2)

    inner = gradtx.parallel.sharded_state(tx, "data")
    line = Mesh(np.array(jax.devices()[:4]), ("data",))

    def step(p, g):  # every replica holds a quarter of each slot
        state = inner.init(p)
        assert all(x.size <= 64 * 512 // 4 for x in jax.tree.leaves(state) if x.ndim > 1)
        return inner.update(g, state, p)[0]

    mapped = jax.jit(jax.shard_map(step, mesh=line, in_specs=(P(), P()), out_specs=P(), check_vma=False))
    helpers.assert_trees_close(mapped(params, grads), ref_u, rtol=0, atol=1e-7)


def _zero_in_shard_map(tx, params, grads, steps, gather_state=False):
    """`steps` steps of `sharded_state(tx)` inside `shard_map` over 4 devices: the last updates and the state
    as the replicas hold it (rows)."""
    zero = gradtx.parallel.sharded_state(tx, "data", gather_state=gather_state)
    line = Mesh(np.array(jax.devices()[:4]), ("data",))

    def run(p, g):
        state = zero.init(p)
        for k in range(steps):
            u, state = zero.update(jax.tree.map(lambda x, k=k: x * 0.5**k, g), state, p)
        return u, state

    mapped = jax.shard_map(run, mesh=line, in_specs=(P(), P()), out_specs=(P(), P("data")), check_vma=False)
    return jax.jit(mapped)(params, grads)


@pytest.mark.parametrize("fmt", ["8bit", "4bit"])
def test_zero_one_in_shard_map_quantizes_each_replicas_slice_in_the_parameters_blocks(fmt):
    # "v" has 8,192 elements: quantized, as unsharded, though a replica holds 2,048 (under `min_size`)
    tx = _tx(fmt)
    params = {**_params(), "v": jnp.linspace(-2.0, 2.0, 16 * 512).reshape(16, 512)}
    # multiples of 2^-8 halved at each step: the replicas' sum (the reduce-scatter) is exact, so each slice is
    # given the very gradient, and its codes are the unsharded step's, bit for bit
    grads = jax.tree.map(lambda p: jnp.round(256 * jnp.cos(3.0 * p)) / 256 + 0.125, params)

    def unsharded(p, g):  # jitted, as the sharded steps are (XLA's fusions round alike)
        state = tx.init(p)
        for k in range(3):
            u, state = tx.update(jax.tree.map(lambda x, k=k: x * 0.5**k, g), state, p)
        return u, state

    ref_u, state = jax.jit(unsharded)(params, grads)
    u, rows = _zero_in_shard_map(tx, params, grads, steps=3)
    # the updates to float32 rounding (a replica's flat slice of "v" and the whole (16, 512) leaf compile to
    # different kernels, which round an ulp or two apart); the codes and scales bit for bit
    helpers.assert_trees_close(u, ref_u, rtol=5e-7, atol=0)

    like = jax.eval_shape(tx.init, params)
    whole = gradtx.parallel.unshard_state(rows, like)  # the unsharded layout: the same codes
    stored = [x for x in jax.tree.leaves(whole, is_leaf=lowbit.is_stored) if lowbit.is_stored(x)]
    assert len(stored) == 4 and all(isinstance(x, lowbit.Quantized) for x in stored)  # m, v of "w" and "v"
    refs = [x for x in jax.tree.leaves(state, is_leaf=lowbit.is_stored) if lowbit.is_stored(x)]
    for mine, ref in zip(stored, refs, strict=True):
        assert mine.shape == ref.shape and mine.format == ref.format
        np.testing.assert_array_equal(np.asarray(mine.codes), np.asarray(ref.codes))
        np.testing.assert_array_equal(np.asarray(mine.scales), np.asarray(ref.scales))
    back = gradtx.parallel.shard_state(whole, 4)  # and back to the replicas' rows, bit for bit
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(rows), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert jax.tree.structure(back) == jax.tree.structure(rows)


@pytest.mark.parametrize("fmt", ["bf16+sr", "bf16+8"])
def test_zero_one_in_shard_map_moves_bfloat16_slots_between_device_counts(fmt):
    tx, params = _tx(fmt), _params()
    grads = jax.tree.map(jnp.cos, params)
    _, rows = _zero_in_shard_map(tx, params, grads, steps=2)
    whole = gradtx.parallel.unshard_state(rows, jax.eval_shape(tx.init, params))
    slots = [x for x in jax.tree.leaves(whole, is_leaf=lowbit.is_stored) if lowbit.is_stored(x)]
    assert [x.shape for x in slots] == [(8,), (64, 512)] * 2  # the parameters' shapes again
    state = tx.init(params)
    for k in range(2):
        _, state = tx.update(jax.tree.map(lambda x, k=k: x * 0.5**k, grads), state, params)
    # each replica rounds its slice with its own noise: up or down at each of the two steps, so the values
    # are within two bfloat16 steps (2^-6 relative) of one device's
    helpers.assert_trees_close(lowbit.dequantized(whole), lowbit.dequantized(state), rtol=2**-6, atol=1e-6)
    back = gradtx.parallel.shard_state(whole, 4)
    assert jax.tree.structure(back) == jax.tree.structure(rows)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(rows), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_zero_one_in_shard_map_refuses_a_slice_whose_blocks_are_not_the_parameters():
    tx = _tx("8bit")
    params = {"w": jnp.ones((64, 500))}  # blocks of 256 along each row of 500, not of the flattened leaf
    message = (
        r"`low_bit_state`: the 8-bit slot of the parameter at \['w'\] \(shape \(64, 500\)\) cannot be "
        r"kept on a replica's flat slice of 8000 of its elements .* its blocks run along rows of 500 "
        r"elements, not a multiple of 256. Use `sharded_state\(\.\.\., gather_state=True\)`"
    )
    with pytest.raises(ValueError, match=message):
        _zero_in_shard_map(tx, params, params, steps=1)
    flat = {"w": jnp.ones(32000)}  # the flattened leaf's blocks, but slices of 8,000
    with pytest.raises(
        ValueError, match=r"\(shape \(32000,\)\).*blocks: 8000 is not a multiple of its blocks' 256"
    ):
        _zero_in_shard_map(tx, flat, flat, steps=1)
    grads = jax.tree.map(jnp.cos, params)  # the way the message names: the rule on whole tensors
    u, _ = _zero_in_shard_map(tx, params, grads, steps=1, gather_state=True)
    helpers.assert_trees_close(u, tx.update(grads, tx.init(params), params)[0], rtol=0, atol=1e-7)


def test_packed_parameters_keep_low_bit_slots_per_buffer():
    params = {f"layer{i}": {"w": jnp.full((32, 64), 0.1 * i), "b": jnp.zeros(64)} for i in range(4)}
    packed = gradtx.packing.pack(params, max_leaf_size=4096)
    tx = gradtx.low_bit_state(gradtx.optax_compat.adamw(1e-2, weight_decay=1e-2), "8bit")
    plain = gradtx.optax_compat.adamw(1e-2, weight_decay=1e-2)
    grads = gradtx.packing.pack(jax.tree.map(lambda p: jnp.sin(p + 1.0), params), max_leaf_size=4096)
    state, ref = tx.init(packed), plain.init(packed)
    assert any(isinstance(x, lowbit.Quantized) for x in jax.tree.leaves(state, is_leaf=lowbit.is_stored))
    u, state = jax.jit(tx.update)(grads, state, packed)
    r, ref = plain.update(grads, ref, packed)
    helpers.assert_trees_close(gradtx.packing.unpack(u), gradtx.packing.unpack(r), rtol=0, atol=1e-4)
    nu = gradtx.get_slot(state, "nu")  # leaf by leaf, dequantized
    assert jax.tree.map(jnp.shape, nu) == jax.tree.map(jnp.shape, params)


@pytest.mark.parametrize("fmt", ["4bit", "bf16+sr"])
def test_orbax_restores_low_bit_state_onto_fewer_devices(fmt, tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    tx, params = _tx(fmt), _params()
    grads = jax.tree.map(jnp.cos, params)
    big = _mesh(False)
    placed = _placed(params, big)
    _, state = jax.jit(tx.update)(_placed(grads, big), tx.init(placed), placed)
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(tmp_path / "state", state)
        ckptr.wait_until_finished()
        small = Mesh(np.array(jax.devices()[:2]).reshape(2, 1), ("data", "model"))
        target = tx.init(_placed(params, small))  # orbax reads the shardings to restore onto from it
        restored = ckptr.restore(tmp_path / "state", target)
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    assert all(len(x.sharding.device_set) <= 2 for x in jax.tree.leaves(restored))
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)
    # the count, a scalar orbax commits to one device, joins the mesh
    restored = jax.tree.map(lambda x: x if x.ndim else jax.device_put(x, NamedSharding(small, P())), restored)
    on_small = _placed(params, small), _placed(grads, small)
    again = jax.jit(tx.update)(on_small[1], restored, on_small[0])
    helpers.assert_trees_close(again, jax.jit(tx.update)(grads, state, params), rtol=0, atol=0)


def test_a_slot_for_a_slice_of_no_known_parameter_is_refused_by_name():
    from gradtx._core import sliced
    from gradtx.parallel._sharded_layout import Slices

    w, v = (jax.tree_util.DictKey("w"),), (jax.tree_util.DictKey("v"),)
    formats = (lowbit.blockwise(8), lowbit.blockwise(8, signed=False), 0)
    with slot_formats.storing(*formats), sliced.holding(Slices(4, ("data",), {"['w']": (64, 512)})):
        assert slot_formats.format_for(jnp.zeros(8192), True, w) == formats[1]  # a quarter of "w"
        assert slot_formats.format_for(jnp.zeros((64, 512)), True, w) == formats[1]  # "w" whole
        with pytest.raises(
            ValueError, match=r"slice of 8192 elements at \['v'\], which is not a slice of the"
        ):
            slot_formats.format_for(jnp.zeros(8192), True, v)  # a tree a combinator changed
