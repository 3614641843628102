"""gradtx/packing: packed parameters give every transform its per-leaf numbers, gradients arrive packed,
leaf-wise members see views, and slots, checkpoints and training helpers work by leaf name."""

from __future__ import annotations

import re
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx import packing
from tests import catalog, helpers
from tests.test_contract import ENTRIES, _build, _grads, _params


class Pair(NamedTuple):
    kernel: jax.Array
    bias: jax.Array


def _mixed_tree():
    rng = np.random.default_rng(0)

    def f32(*s):
        return jnp.asarray(rng.standard_normal(s), jnp.float32)

    return {
        "dense": Pair(f32(4, 3), f32(3)),
        "half": [
            jnp.asarray(rng.standard_normal(5), jnp.bfloat16),
            jnp.asarray(rng.standard_normal((2, 2)), jnp.float16),
        ],
        "scalar": jnp.asarray(0.5, jnp.float32),
        "big": f32(300),
        "steps": jnp.arange(3),
        "empty": jnp.zeros((0, 3)),
        "none": None,
    }


def test_pack_groups_small_float_leaves_by_dtype_and_unpack_gives_them_back_exactly():
    tree = _mixed_tree()
    packed = packing.pack(tree, max_leaf_size=100)
    assert [(g.dtype, g.length) for g in packed.layout.groups] == [
        ("float32", 16),
        ("bfloat16", 5),
        ("float16", 4),
    ]
    assert len(packed.buffers) == 3 + 3  # the groups, then "big", "empty", "steps" as they are
    assert [packed.buffers[i] is tree[k] for i, k in [(3, "big"), (4, "empty"), (5, "steps")]] == [True] * 3
    out = packing.unpack(packed)
    assert jax.tree.structure(out, is_leaf=lambda x: x is None) == jax.tree.structure(
        tree, is_leaf=lambda x: x is None
    )
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(tree), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a, np.float64), np.asarray(b, np.float64))
    assert out["none"] is None and isinstance(out["dense"], Pair)


def test_pack_accepts_shape_dtype_structs_and_another_tree_in_the_same_layout():
    tree = _mixed_tree()
    abstract = packing.pack(
        jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)
    )
    packed = packing.pack(tree)
    assert abstract.layout == packed.layout
    unplaced = packing.layout_of(jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree))
    assert [g.sharding for g in unplaced.groups] == [None] * 3  # where the leaves lie is not known
    assert [(b.shape, b.dtype) for b in abstract.buffers] == [(b.shape, b.dtype) for b in packed.buffers]
    doubled = packing.pack(jax.tree.map(lambda x: x * 2, tree), layout=packed.layout)
    np.testing.assert_array_equal(packing.unpack(doubled)["dense"].kernel, tree["dense"].kernel * 2)
    zeros = packing.pack({**tree, "scalar": None}, layout=packed.layout)  # a missing leaf packs as zeros
    assert float(packing.unpack(zeros)["scalar"]) == 0.0


def test_gradients_through_unpack_arrive_packed_and_equal_the_per_leaf_ones():
    tree = {
        "w": jnp.arange(6.0).reshape(2, 3),
        "b": jnp.ones(3),
        "unused": jnp.ones(4),
        "big": jnp.ones(70_000),
    }

    def loss(t):
        return jnp.sum(jnp.sin(t["w"]) @ t["b"]) + jnp.sum(t["big"] ** 2)

    packed = packing.pack(tree)
    grads = jax.jit(jax.grad(lambda p: loss(packing.unpack(p))))(packed)
    assert packing.is_packed(grads) and grads.layout == packed.layout
    expected = jax.grad(loss)(tree)
    for a, b in zip(jax.tree.leaves(packing.unpack(grads)), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.any(packing.unpack(grads)["unused"])


def test_views_slice_at_runtime_offsets_so_leaves_of_one_shape_share_a_kernel():
    """XLA sees no constant offset (one kernel per leaf shape, not per leaf); the backward is one
    concatenation."""
    packed = packing.pack({f"l{i}": {"w": jnp.ones((4, 3)), "b": jnp.ones(3)} for i in range(20)})
    step = jax.jit(jax.grad(lambda p: sum(jnp.sum(jnp.sin(x)) for x in jax.tree.leaves(packing.unpack(p)))))
    hlo = step.lower(packed).compile().as_text()
    slices = re.findall(r"dynamic-slice\(([^)]*)\)", hlo)
    assert len(slices) == 40
    assert not any("constant" in operands.split(",")[1] for operands in slices), slices[:3]
    assert len(re.findall(r"\bconcatenate\(", hlo)) == 1


# --------------------------------------------------------------------------- every transform on packed params

_PACKABLE = [e for e in ENTRIES if "axis_name" not in e.example]  # the parallel wrappers: tests/parallel


@pytest.mark.parametrize("entry", _PACKABLE, ids=[e.name for e in _PACKABLE])
def test_every_registered_factory_gives_its_per_leaf_numbers_on_packed_params(entry):
    params = _params()
    grads = [_grads(params, seed) for seed in range(1, 5)]
    extra = [entry.extra(t) for t in range(len(grads))]
    # compiled, as a packed model trains: 2 programs instead of every op's own (the cheaper way here)
    expected, state = helpers.run(_build(entry), params, grads, jit=True, extra_args_seq=extra)
    packed = packing.pack(params)
    packed_grads = [packing.pack(g, layout=packed.layout) for g in grads]
    tx = _build(entry)
    actual, packed_state = helpers.run(tx, packed, packed_grads, jit=True, extra_args_seq=extra)
    # XLA vectorizes a packed buffer and the leaves differently: exp, log and divisions differ in their last
    # bits (a few float32 ulps: 2.4e-7 on values near 0.3, 1.2e-7 on values near 0.01)
    tol = helpers.GGT_TOLERANCE if "ggt" in entry.name else {"rtol": 2e-6, "atol": 3e-7}
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert packing.is_packed(a)
        helpers.assert_trees_close(packing.unpack(a), e, msg=f"{entry.name}: step {t + 1}", **tol)
    for name in gradtx.slot_names(state):
        helpers.assert_trees_close(
            gradtx.get_slot(packed_state, name),
            gradtx.get_slot(state, name),
            msg=f"{entry.name}: slot {name}",
            **tol,
        )
    if isinstance(tx, gradtx.ElementWise):  # its slots are buffers, not leaves
        assert len(jax.tree.leaves(packed_state)) < len(jax.tree.leaves(state)) or not gradtx.slot_names(
            state
        )


def test_the_kinds_of_the_catalogue():
    element_wise = {e.name for e in ENTRIES if isinstance(e.build(), gradtx.ElementWise)}
    assert {
        "adam",
        "sgd",
        "momentum",
        "rmsprop",
        "ftrl",
        "adagrad",
        "adamw",
        "lazy_adam",
        "nadam",
        "ggt",
        "clip_by_global_norm",
        "accumulate_gradients",
        "apply_if_finite",
        "moving_average",
    } <= element_wise
    assert (
        not {
            "lars",
            "shampoo",
            "normalized_sgd",
            "clip_by_norm",
            "masked",
            "partition",
            "freeze",
            "add_noise",
            "scale_gradients",
            "transform_gradients",
            "per_leaf",
        }
        & element_wise
    )
    for e in ENTRIES:
        assert isinstance(e.build(), (gradtx.ElementWise, gradtx.LeafWise)), e.name


def test_a_chain_runs_its_element_wise_members_on_buffers_and_the_others_on_views():
    params = _params()
    tx = gradtx.chain(gradtx.clip_by_norm(0.5), gradtx.scale_by_adam(), gradtx.scale_by_learning_rate(0.1))
    assert isinstance(tx, gradtx.LeafWise)
    packed = packing.pack(params)
    state = tx.init(packed)
    assert packing.is_packed(state[1].m) and state[0] == gradtx.EmptyState()
    grads = [_grads(params, seed) for seed in range(1, 4)]
    expected, _ = helpers.run(tx, params, grads)
    actual, _ = helpers.run(tx, packed, [packing.pack(g, layout=packed.layout) for g in grads])
    helpers.assert_trees_close(packing.unpack(actual[-1]), expected[-1], rtol=1e-6, atol=1e-7)


def test_a_foreign_transform_sees_leaves_unless_declared_element_wise():
    """optax's per-tensor trust ratio on packed params: per leaf inside gradtx.chain (leaf-wise by
    default)."""
    params = _params()
    grads = [_grads(params, seed) for seed in range(1, 3)]
    packed = packing.pack(params)
    packed_grads = [packing.pack(g, layout=packed.layout) for g in grads]
    trust = gradtx.chain(optax.scale_by_trust_ratio(), gradtx.sgd(0.1))
    expected, _ = helpers.run(trust, params, grads)
    actual, _ = helpers.run(trust, packed, packed_grads)
    helpers.assert_trees_close(packing.unpack(actual[-1]), expected[-1], rtol=1e-6, atol=1e-7)
    declared = gradtx.chain(gradtx.ElementWise(*optax.adam(0.1)))
    assert isinstance(declared, gradtx.ElementWise)
    state = declared.init(packed)
    assert packing.is_packed(state[0][0].mu)


def test_slots_and_npz_checkpoints_read_packed_states_by_leaf_name(tmp_path):
    params = _params()
    tx = gradtx.adam(0.1, mu_dtype=jnp.bfloat16)
    packed = packing.pack(params)
    _, state = helpers.run(tx, packed, [packing.pack(_grads(params, 1), layout=packed.layout)])
    m = gradtx.get_slot(state, "m", "dense/kernel")
    assert m.shape == (4, 3) and m.dtype == jnp.bfloat16
    path = tmp_path / "state.npz"
    gradtx.checkpoint.save_npz(path, state)
    assert "[0].m['dense']['kernel']" in np.load(path).files  # the name an unpacked state gives it
    restored = gradtx.checkpoint.load_npz(path, jax.eval_shape(tx.init, packed))
    assert packing.is_packed(restored[0].m)
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
    unpacked = gradtx.checkpoint.load_npz(path, tx.init(params))  # a packed run resumes unpacked ...
    np.testing.assert_array_equal(
        np.asarray(gradtx.get_slot(unpacked, "m", "dense/kernel"), np.float32), np.asarray(m, np.float32)
    )
    gradtx.checkpoint.save_npz(tmp_path / "unpacked.npz", unpacked)  # ... and the other way
    again = gradtx.checkpoint.load_npz(tmp_path / "unpacked.npz", tx.init(packed))
    assert again[0].m.layout == state[0].m.layout


def test_optimize_loss_trains_packed_params_with_one_line():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((32, 4)), jnp.float32)
    y = x @ jnp.array([1.0, -2.0, 0.5, 3.0]) + 0.1
    params = {"w": jnp.zeros(4), "b": jnp.zeros(())}

    def loss(p, x, y):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    trainer = gradtx.optimize_loss(
        loss, "Adam", learning_rate=0.1, clip_gradients=5.0, summaries=["loss", "gradient_norm"]
    )
    plain, packed = trainer.init(params), trainer.init(packing.pack(params))  # the one line
    step = jax.jit(trainer.step)
    for _ in range(50):
        plain, plain_metrics = step(plain, x, y)
        packed, packed_metrics = step(packed, x, y)
    assert packing.is_packed(packed.params)
    helpers.assert_trees_close(packing.unpack(packed.params), plain.params, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(packed_metrics, plain_metrics, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"`optimize_loss`: `variables` selects parameters by key path"):
        gradtx.optimize_loss(loss, "SGD", learning_rate=0.1, variables=["w"]).init(packing.pack(params))


def test_flax_train_state_with_packed_params():
    from flax.training import train_state

    params = _params()
    packed = packing.pack(params)

    def loss(p):
        return sum(jnp.sum(x**2) for x in jax.tree.leaves(p))

    state = train_state.TrainState.create(apply_fn=None, params=packed, tx=gradtx.adam(0.1))
    grads = jax.grad(lambda p: loss(packing.unpack(p)))(state.params)
    state = state.apply_gradients(grads=grads)
    reference = train_state.TrainState.create(apply_fn=None, params=params, tx=gradtx.adam(0.1))
    reference = reference.apply_gradients(grads=jax.grad(loss)(params))
    helpers.assert_trees_close(packing.unpack(state.params), reference.params, rtol=1e-6)


def test_flax_serialization_stores_packed_trees_by_leaf_name():
    import flax.serialization
    from flax.training import train_state

    params = _params()

    def make(p):
        return train_state.TrainState.create(apply_fn=None, params=p, tx=gradtx.adam(0.1))

    state = make(packing.pack(params))
    state = state.apply_gradients(grads=packing.pack(_grads(params, 1), layout=state.params.layout))
    data = flax.serialization.to_bytes(state)
    restored = flax.serialization.from_bytes(make(packing.pack(params)), data)
    assert packing.is_packed(restored.params) and packing.is_packed(restored.opt_state[0].m)
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(a, b)
    as_leaves = flax.serialization.from_bytes(make(params), data)  # the same names unpacked
    np.testing.assert_array_equal(
        as_leaves.params["dense"]["kernel"], packing.unpack(state.params)["dense"]["kernel"]
    )
    np.testing.assert_array_equal(
        as_leaves.opt_state[0].m["layers"][0], packing.unpack(state.opt_state[0].m)["layers"][0]
    )


def test_orbax_round_trips_a_packed_training_state(tmp_path):
    import orbax.checkpoint as ocp

    params = _params()
    tx = gradtx.adam(0.1)
    packed = packing.pack(params)
    _, state = helpers.run(tx, packed, [packing.pack(_grads(params, 1), layout=packed.layout)])
    item = {"params": packed, "opt_state": state}
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "packed", item)
        checkpointer.wait_until_finished()
        restored = checkpointer.restore(tmp_path / "packed", jax.eval_shape(lambda: item))
    assert packing.is_packed(restored["params"]) and restored["params"].layout == packed.layout
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(item), strict=True):
        np.testing.assert_array_equal(a, b)


def test_registry_optimizers_are_plain_chains_without_layouts():
    for entry in catalog.entries("optimizer"):
        state = entry.build().init(_params())
        nodes = jax.tree.leaves(state, is_leaf=packing.is_packed)
        assert not any(packing.is_packed(x) for x in nodes), entry.name


# --------------------------------------------------------------------------- errors


def test_pack_and_unpack_errors():
    tree = {"a": jnp.ones((4, 3)), "b": jnp.ones(3)}
    packed = packing.pack(tree)
    with pytest.raises(
        gradtx.TreeMismatchError, match=r"`pack`: the tree does not have the structure of the layout"
    ):
        packing.pack({"a": jnp.ones((4, 3))}, layout=packed.layout)
    with pytest.raises(
        gradtx.TreeMismatchError, match=r"`pack`: the leaf \['a'\] has shape \(3, 4\), but the layout"
    ):
        packing.pack({"a": jnp.ones((3, 4)), "b": jnp.ones(3)}, layout=packed.layout)
    with pytest.raises(TypeError, match=r"`pack`: `layout` must be a `Layout`"):
        packing.pack(tree, layout="packed")
    with pytest.raises(TypeError, match=r"`pack`: `max_leaf_size` must be an int >= 0, got -1"):
        packing.pack(tree, max_leaf_size=-1)
    wrong = packing.Packed((jnp.ones(16),), packed.layout)
    with pytest.raises(
        ValueError, match=r"`unpack`: buffer 0 has shape \(16,\), but its layout was made for \(15,\)"
    ):
        packing.unpack(wrong)
    stacked = packing.Packed((jnp.ones((2, 15)),), packed.layout)  # a leading dim on every buffer: fine
    assert packing.unpack(stacked)["a"].shape == (2, 4, 3)
