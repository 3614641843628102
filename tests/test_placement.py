"""Slots are placed like their parameters when `init` runs, in each way JAX runs it (`_core.placement`).

For every registered optimizer, and every wrapper that needs no mapped axis, on a 4 x 2 mesh
of 8 CPU devices with a kernel sharded `P("data", "model")`, a bias sharded `P("model")` and
a replicated vector: `init` called eagerly on committed arrays, under `jax.jit` with Auto
axes (GSPMD propagates the params' shardings to the slots), under `jax.jit` inside
`jax.set_mesh` with Explicit axes (the slots' types carry the shardings), and abstractly,
`jax.eval_shape(tx.init, ...)` on `jax.ShapeDtypeStruct` params under Explicit axes (as a
checkpoint restore target is made: nothing allocated). A slot shaped like its parameter
must have the parameter's sharding; a window `[n, *shape]` the parameter's along its own
axes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from tests import catalog

SHAPES = {"w": (8, 4), "b": (4,), "ln": (8,)}
SPECS = {"w": P("data", "model"), "b": P("model"), "ln": P()}
MODES = ["eager", "jit_auto", "jit_explicit", "shape_dtype_struct"]
ENTRIES = [e for e in catalog.entries("optimizer")] + [
    e for e in catalog.entries("wrapper") if "axis_name" not in e.example
]


def _mesh(explicit: bool):
    kind = AxisType.Explicit if explicit else AxisType.Auto
    return jax.make_mesh((4, 2), ("data", "model"), axis_types=(kind, kind))


def _params(mesh):
    rng = np.random.default_rng(0)
    return {
        "layer": {
            k: jax.device_put(jnp.asarray(rng.standard_normal(s), jnp.float32), NamedSharding(mesh, SPECS[k]))
            for k, s in SHAPES.items()
        }
    }


def _init(tx, mode):
    if mode in ("jit_explicit", "shape_dtype_struct"):
        mesh = _mesh(explicit=True)
        with jax.set_mesh(mesh):
            params = _params(mesh)
            if mode == "jit_explicit":
                return params, jax.jit(tx.init)(params)
            abstract = jax.tree.map(
                lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype, sharding=p.sharding), params
            )
            return params, jax.eval_shape(tx.init, abstract)
    mesh = _mesh(explicit=False)
    params = _params(mesh)
    if mode == "eager":
        return params, tx.init(params)
    return params, jax.jit(tx.init)(params)


def _spec(sharding, ndim):
    assert isinstance(sharding, NamedSharding), sharding
    spec = tuple(sharding.spec)
    return spec + (None,) * (ndim - len(spec))


def _checked(state, params, what):
    """The number of slot leaves checked; asserts each is placed like its parameter."""
    checked = 0
    param_leaves = jax.tree.leaves(params)
    for name, tree in gradtx.slots(state).items():
        leaves = jax.tree.leaves(tree, is_leaf=lambda x: x is None)
        if len(leaves) != len(param_leaves):
            continue  # per-dimension statistics (Shampoo's), one tree per leaf of another structure
        for p, s in zip(param_leaves, leaves, strict=True):
            if s is None or not hasattr(s, "sharding"):
                continue
            spec = p.sharding.spec
            if s.shape == p.shape:
                want = spec
            elif s.shape[1:] == p.shape:
                want = P(None, *spec)
            else:
                continue
            got = s.sharding
            assert _spec(got, len(s.shape)) == _spec(NamedSharding(p.sharding.mesh, want), len(s.shape)), (
                f"{what}: slot {name!r} of a {p.shape} parameter sharded {spec} is {got}"
            )
            checked += 1
    return checked


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_slots_are_placed_like_their_parameters(entry, mode):
    tx = entry.build()
    params, state = _init(tx, mode)
    checked = _checked(state, params, f"{entry.name} ({mode})")
    assert checked or not gradtx.slot_names(state), f"{entry.name} ({mode}): no slot was checked"


@pytest.mark.parametrize("mode", MODES)
def test_the_clip_adamw_recipe_is_placed_like_its_parameters(mode):
    """The most common large-model recipe, as users chain it."""
    tx = gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.adamw(1e-3, weight_decay=1e-4))
    params, state = _init(tx, mode)
    assert _checked(state, params, f"clip + adamw ({mode})") == 2 * len(SHAPES)  # m and v of each leaf


def test_a_traced_slot_is_folded_to_a_constant():
    """`init` under jit reads no parameter at run time: the slot's `where(False, param, fill)` folds away."""
    mesh = _mesh(explicit=False)
    params = _params(mesh)
    hlo = jax.jit(gradtx.adam(0.1).init).lower(params).compile().as_text()
    assert "select" not in hlo
    state = jax.jit(gradtx.adam(0.1).init)(params)
    np.testing.assert_array_equal(np.asarray(state[0].m["layer"]["w"]), 0.0)


@pytest.mark.parametrize("explicit", [False, True], ids=["jit_auto", "jit_explicit"])
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_init_under_jit_never_makes_a_whole_slot_on_one_device(entry, explicit):
    """The compiled `init` of each device holds its shard of a sharded kernel's slots only: no array of the
    kernel's whole shape is ever made (optax issue #548), with Auto axes (GSPMD partitions the slots'
    fills by the params' shardings) and with Explicit axes (the slots' types)."""
    shape, spec = (48, 40), P("data", "model")  # 12 x 20 on each device; no other state has this shape
    mesh = _mesh(explicit)
    kernel = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))
    params = {"layer": {"w": kernel, "ln": jax.ShapeDtypeStruct((48,), jnp.float32)}}
    tx = entry.build()
    with jax.set_mesh(mesh):
        hlo = jax.jit(tx.init).lower(params).compile().as_text()
        abstract = jax.eval_shape(tx.init, params)
    if any(x.shape == shape for x in jax.tree.leaves(abstract)):  # a kernel-shaped slot: its shard is made
        assert "f32[12,20]" in hlo, entry.name
    assert "f32[48,40]" not in hlo, f"{entry.name}: init makes a whole {shape} array on a device"
