"""Sharding is tested like TF parity: under `jax.jit` with `NamedSharding` on a 2-D mesh, every optimizer's
compiled step has no more collectives than optax's equivalent, and its slots are sharded like its params.

The tree is the one a pod would shard: 2 layers of a kernel `w` sharded `P("data", "model")`,
a bias `b` sharded `P("model")` and a norm scale `ln` replicated, on 8 CPU devices as a
4 x 2 mesh. Each step is compiled with params and state donated, as in a training loop,
and the collectives are counted in the compiled HLO. Optimizers optax lacks: none for an
element-wise rule, only all-reduces (the norms) for a per-tensor rule, and Shampoo, whose
preconditioners need whole statistics matrices, as many on packed parameters as per leaf.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from benchmarks.sharding import KINDS, count
from gradtx import packing
from tests import catalog

MESH = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))
LAYERS = 2  # more than one (the groups of a packed tree, a stack of matrices); each compiles for its leaves
SPECS = {"w": P("data", "model"), "b": P("model"), "ln": P()}

# optax's equivalent of each gradtx optimizer (its registry example), where optax has one
OPTAX = {
    "sgd": lambda: optax.sgd(0.1),
    "momentum": lambda: optax.sgd(0.05, momentum=0.9),
    "adagrad": lambda: optax.adagrad(0.5, initial_accumulator_value=0.1),
    "adadelta": lambda: optax.adadelta(1.0, rho=0.9, eps=1e-3),
    "adam": lambda: optax.adam(0.05),
    "adam_gs": lambda: optax.adam(0.05),
    "lazy_adam": lambda: optax.adam(0.05),
    "lazy_adam_gs": lambda: optax.adam(0.05),
    "nadam": lambda: optax.nadam(0.05),
    "adamax": lambda: optax.adamax(0.05),
    "adamw": lambda: optax.adamw(0.05, weight_decay=0.001),
    "amsgrad": lambda: optax.amsgrad(0.001),
    "rmsprop": lambda: optax.rmsprop(0.01, decay=0.9, momentum=0.5, eps=1e-10),
    "lars": lambda: optax.lars(0.1, weight_decay=1e-4, trust_coefficient=0.01, momentum=0.9),
    "adafactor": lambda: optax.adafactor(0.2, min_dim_size_to_factor=2, momentum=0.5, weight_decay_rate=1e-4),
    "lamb": lambda: optax.lamb(0.2, weight_decay=1e-4),
    "novograd": lambda: optax.novograd(0.2, weight_decay=1e-4),
    "sm3": lambda: optax.sm3(0.5, momentum=0.9),
    "muon": lambda: optax.contrib.muon(0.2, weight_decay=1e-4),
    "galore": lambda: optax.contrib.galore(0.05, rank=2, update_proj_gap=2),  # an SVD per matrix: gathers
    "schedule_free_adamw": lambda: optax.contrib.schedule_free_adamw(0.05, warmup_steps=2, weight_decay=1e-4),
    "schedule_free_sgd": lambda: optax.contrib.schedule_free_sgd(0.1, warmup_steps=2, weight_decay=1e-4),
    "prodigy": lambda: optax.contrib.prodigy(),
    "dadapt_adamw": lambda: optax.contrib.dadapt_adamw(),
    "dog": lambda: optax.contrib.dog(),
    "dowg": lambda: optax.contrib.dowg(),
    # building blocks, for test_explicit_mode.py (optax.contrib exports only dog and dowg)
    "scale_by_dog": lambda: optax.contrib._dog.scale_by_dog(("distance", 0.01)),
    "scale_by_dowg": lambda: optax.contrib._dog.scale_by_dowg(),
}
GATHERS = {"shampoo"}  # whole statistics matrices per tensor dimension (an SVD each): gathers are inherent
# L-BFGS's inner products are optax's (`jnp.vdot` of flattened leaves, gathered: 16 all-gathers here, as
# optax.lbfgs's compiled step has; optax's own step cannot run donated: its two memories share one buffer)
GATHERS.add("lbfgs")
GATHERS.add("psgd_kron")  # whole Kronecker factors per tensor dimension (triangular solves): inherent
GATHERS.add("soap")  # SOAP: whole per-dimension statistics too (an eigh, then QRs): gathers are inherent
# pytorch-optimizer's Muon family and SCION's spectral oracles: Newton-Schulz on whole matrices
GATHERS |= {"normuon", "adamuon", "muon_clip", "scion", "scion_light"}
REDUCES = {"ggt"}  # element-wise through sums over all elements (its W x W Gram matrix, M^T m): all-reduces
REDUCES |= {"polyak_sgd"}  # a global norm; optax's polyak_sgd needs a `value` this harness does not pass
REDUCES |= {"mechanize"}  # its bets' inner products and norms over all elements: all-reduces only
OPTIMIZERS = [e.name for e in catalog.entries("optimizer")]


def _params() -> dict:
    rng = np.random.default_rng(0)
    shapes = {"w": (32, 64), "b": (64,), "ln": (32,)}
    return {
        f"layer{i}": {
            k: jax.device_put(jnp.asarray(rng.standard_normal(s), jnp.float32), NamedSharding(MESH, SPECS[k]))
            for k, s in shapes.items()
        }
        for i in range(LAYERS)
    }


def _step(tx, extra, apply):
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params, **extra)
        return apply(params, updates), state

    return jax.jit(step, donate_argnums=(0, 1))


def _run(tx, extra, params, apply=gradtx.apply_updates):
    """`(collectives, initial state, state after one compiled donated step)`."""
    grads = jax.tree.map(lambda p: p * 0.01, params)
    state = tx.init(params)
    compiled = _step(tx, extra, apply).lower(params, state, grads).compile()  # run as compiled: once
    _, new_state = compiled(jax.tree.map(jnp.copy, params), tx.init(params), grads)
    return count(compiled.as_text()), state, new_state


@functools.cache
def _optax_count(name: str) -> dict[str, int]:
    return _run(OPTAX[name](), {}, _params(), optax.apply_updates)[0]


def _assert_slots_sharded_like(state, params, what: str) -> None:
    """Every slot leaf shaped like its param has its sharding; `[n, *shape]` windows have it on their own
    dims."""
    checked = 0
    param_leaves = jax.tree.leaves(packing.unpack(params))
    for name, tree in gradtx.slots(state).items():
        leaves = jax.tree.leaves(tree, is_leaf=lambda x: x is None)  # None: another group's (partition)
        if len(leaves) != len(param_leaves):
            continue  # per-dimension statistics (Shampoo): not shaped like the params
        for p, s in zip(param_leaves, leaves, strict=True):
            spec = p.sharding.spec
            if s is None:
                continue
            if s.shape == p.shape:
                want = NamedSharding(MESH, spec)
            elif s.shape[1:] == p.shape:
                want = NamedSharding(MESH, P(None, *spec))
            else:
                continue
            assert s.sharding.is_equivalent_to(want, s.ndim), (
                f"{what}: slot {name!r} is {s.sharding}, not {want}"
            )
            checked += 1
    if packing.is_packed(params):  # every packed slot's buffers are placed like the params' buffers
        for node in jax.tree.leaves(state, is_leaf=packing.is_packed):
            if packing.is_packed(node):
                for b, p in zip(node.buffers, params.buffers, strict=True):
                    if b.shape == p.shape:
                        assert b.sharding.is_equivalent_to(p.sharding, b.ndim), what
    assert checked or not gradtx.slot_names(state), f"{what}: no slot was checked"


# Packed params for the rules whose packed step differs from rule to rule: the leaf-wise ones (their
# per-leaf views), the global sums and the gathering rules; an element-wise rule's slots on the packed
# buffers are made by the same `tree.map` for every such rule, so a sample of those stands for the rest
# (every factory's numbers on packed params: test_packing.py)
ELEMENT_WISE_SAMPLE = {"sgd", "momentum", "adam", "ftrl", "adagrad_da", "schedule_free_adamw", "prodigy"}
CASES = [(name, "per_leaf") for name in OPTIMIZERS] + [
    (name, "packed")
    for name in OPTIMIZERS
    if name in ELEMENT_WISE_SAMPLE | REDUCES | GATHERS
    or not isinstance(catalog.entry(name).build(), gradtx.ElementWise)
]


@pytest.mark.parametrize(("name", "layout"), CASES)
def test_compiled_step_has_no_more_collectives_than_optax_and_slots_are_sharded_like_params(name, layout):
    entry = catalog.entry(name)
    params = _params() if layout == "per_leaf" else packing.pack(_params())
    tx = entry.build()
    got, state, stepped = _run(tx, entry.extra(0), params)
    if name in OPTAX:
        limit = _optax_count(name)
    elif isinstance(tx, gradtx.ElementWise) and name not in REDUCES:
        limit = dict.fromkeys(KINDS, 0)
    elif name in GATHERS:
        limit = _run(tx, entry.extra(0), _params())[0]  # packing adds none
    else:  # a per-tensor rule, or a global sum: reductions only, nothing gathered or moved
        limit = {**dict.fromkeys(KINDS, 0), "all-reduce": got["all-reduce"]}
    assert all(got[k] <= limit[k] for k in KINDS), f"{name} ({layout}): {got} > {limit}"
    _assert_slots_sharded_like(state, params, f"{name} init")
    _assert_slots_sharded_like(stepped, params, f"{name} after a step")


def test_the_issue_table_adam_and_clip_adamw():
    """gradtx's adam and chain(clip_by_global_norm, adamw) against optax's, on both layouts."""
    clip_adamw = gradtx.chain(
        gradtx.clip_by_global_norm(1.0),
        gradtx.adamw(0.1, weight_decay=1e-4, scale_decay_by_learning_rate=True),
    )
    ours = {"adam": gradtx.adam(0.1), "clip+adamw": clip_adamw}
    theirs = {
        "adam": optax.adam(0.1),
        "clip+adamw": optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(0.1, weight_decay=1e-4)),
    }
    for label, tx in ours.items():
        reference = _run(theirs[label], {}, _params(), optax.apply_updates)[0]
        assert reference["all-gather"] == 0
        for params in (_params(), packing.pack(_params())):
            got = _run(tx, {}, params)[0]
            assert got == reference, f"{label}: {got} vs optax {reference}"


def test_packing_a_sharded_model_moves_no_data():
    """`pack` groups leaves by sharding; the compiled concatenation and the views have no collective."""
    params = _params()
    packed = packing.pack(params)
    # groups in the order their first leaf comes: layer0's b, ln, w
    assert [tuple(b.sharding.spec) for b in packed.buffers] == [
        ("model", None),
        (None,),
        ("data", "model", None),
    ]
    assert [b.shape for b in packed.buffers] == [(2, LAYERS * 32), (LAYERS * 32,), (4, 2, LAYERS * 8 * 32)]
    views = jax.jit(packing.unpack)
    for p, v in zip(jax.tree.leaves(params), jax.tree.leaves(views(packed)), strict=True):
        np.testing.assert_array_equal(v, p)
        assert v.sharding.is_equivalent_to(p.sharding, v.ndim)
    assert sum(count(views.lower(packed).compile().as_text()).values()) == 0
    pack_step = jax.jit(lambda t: packing.pack(t, layout=packed.layout).buffers)
    assert sum(count(pack_step.lower(params).compile().as_text()).values()) == 0


def test_a_train_step_through_views_adds_no_collective():
    """Forward and backward through `unpack`: as many collectives as the same model on the leaves."""
    x = jax.device_put(jnp.ones((16, 32)), NamedSharding(MESH, P("data", None)))

    def loss(tree, x):
        h = x
        for i in range(LAYERS):
            layer = tree[f"layer{i}"]
            h = jnp.tanh((h * layer["ln"]) @ layer["w"] + layer["b"])[:, :32]
        return jnp.sum(h * h)

    tx = gradtx.adam(0.1)

    def per_leaf(params, state, x):
        updates, state = tx.update(jax.grad(loss)(params, x), state, params)
        return gradtx.apply_updates(params, updates), state

    def packed_step(packed, state, x):
        grads = jax.grad(lambda p: loss(packing.unpack(p), x))(packed)
        updates, state = tx.update(grads, state, packed)
        return gradtx.apply_updates(packed, updates), state

    params = _params()
    packed = packing.pack(params)
    reference = count(jax.jit(per_leaf).lower(params, tx.init(params), x).compile().as_text())
    got = count(jax.jit(packed_step).lower(packed, tx.init(packed), x).compile().as_text())
    assert all(got[k] <= reference[k] for k in KINDS), (got, reference)
    new_packed, _ = jax.jit(packed_step)(packed, tx.init(packed), x)
    new_params, _ = jax.jit(per_leaf)(params, tx.init(params), x)
    for a, b in zip(jax.tree.leaves(packing.unpack(new_packed)), jax.tree.leaves(new_params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_explicit_axes_keep_sharded_leaves_as_they_are():
    """On a mesh of explicit axes (`jax.make_mesh`'s default), a sharded leaf stays its own buffer; a step
    works."""
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    assert set(mesh.axis_types) == {jax.sharding.AxisType.Explicit}
    put = lambda x, spec: jax.device_put(x, NamedSharding(mesh, spec))  # noqa: E731
    params = {
        f"l{i}": {"w": put(jnp.ones((8, 4)) * i, P("data", "model")), "b": put(jnp.ones(4), P())}
        for i in range(3)
    }
    packed = packing.pack(params)
    assert [tuple(b.sharding.spec) for b in packed.buffers] == [(None,)] + [("data", "model")] * 3
    tx = gradtx.adam(0.1)

    def step(p, s):
        grads = jax.grad(lambda q: sum(jnp.sum(x**2) for x in jax.tree.leaves(packing.unpack(q))))(p)
        updates, s = tx.update(grads, s, p)
        return gradtx.apply_updates(p, updates), s

    with jax.set_mesh(mesh):
        new, _ = jax.jit(step)(packed, tx.init(packed))
    for a, p in zip(jax.tree.leaves(packing.unpack(new)), jax.tree.leaves(params), strict=True):
        assert a.sharding.is_equivalent_to(p.sharding, a.ndim)
        np.testing.assert_allclose(a, p - 0.1 * (p != 0), rtol=1e-6)  # Adam's first step: -lr * sign(g)
