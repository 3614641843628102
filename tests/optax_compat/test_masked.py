"""`gradtx.optax_compat.masked` beside `optax.masked`: optax's state layout (`MaskedNode()` where a slot
is left out), the same numbers over 20 steps, `optax.tree.map_params` and flax serialization on its state,
and `mask_compatible_extra_args`."""

from __future__ import annotations

import chex
import flax.serialization
import jax
import jax.numpy as jnp
import pytest

import gradtx.optax_compat as compat
from gradtx import TreeMismatchError

optax = pytest.importorskip("optax")

STEPS = 20

MASKS = {
    "dict": {"w": True, "b": False, "enc": {"x": True, "y": False}},
    "prefix": {"w": False, "b": True, "enc": False},  # False over `enc`: one MaskedNode for the subtree
    "callable": lambda p: jax.tree.map(lambda x: x.ndim == 1, p),
    "all-false": {"w": False, "b": False, "enc": False},
    "nested-prefix": {"w": True, "b": False, "enc": {"x": False, "y": True}},
}
INNERS = {
    "adam": lambda lib: lib.adam(1e-2),
    "sgd-momentum": lambda lib: lib.sgd(1e-2, momentum=0.9),
    "add_decayed_weights": lambda lib: lib.add_decayed_weights(0.1),
    "chain": lambda lib: lib.chain(lib.scale_by_adam(), lib.add_decayed_weights(0.1), lib.scale(-1e-2)),
}
# Every mask with Adam, the other inners with one mask each.
CASES = [(m, "adam") for m in MASKS] + [
    ("dict", "sgd-momentum"),
    ("prefix", "add_decayed_weights"),
    ("nested-prefix", "chain"),
]


def _params():
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    return {
        "w": jax.random.normal(k[0], (3, 2)),
        "b": jax.random.normal(k[1], (2,)),
        "enc": {"x": jax.random.normal(k[2], (2,)), "y": jax.random.normal(k[3], ())},
    }


def _grads(step, params):
    """A fresh gradient each step: noise plus a term in the params."""
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(1), step), len(leaves))
    return treedef.unflatten(
        [0.1 * p + jax.random.normal(k, p.shape) for k, p in zip(keys, leaves, strict=True)]
    )


def _layout(tree):
    """The tree structure with the class names of its nodes (ours are not optax's classes)."""
    return str(jax.tree.structure(tree))


def _assert_same(ours, theirs):
    assert _layout(ours) == _layout(theirs)
    chex.assert_trees_all_close(jax.tree.leaves(ours), jax.tree.leaves(theirs), rtol=1e-6, atol=1e-6)


def _masked(lib, mask, inner="adam", **kwargs):
    return lib.masked(INNERS[inner](lib), MASKS[mask] if isinstance(mask, str) else mask, **kwargs)


def _run(lib, tx, jit, steps=STEPS):
    params = _params()
    state = tx.init(params)

    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return lib.apply_updates(p, u), s

    step = jax.jit(step) if jit else step
    for t in range(steps):
        params, state = step(params, state, _grads(t, params))
    return params, state


@pytest.mark.parametrize(("mask", "inner"), CASES, ids=[f"{m}-{i}" for m, i in CASES])
def test_the_state_has_optax_s_layout(mask, inner):
    ours, theirs = _masked(compat, mask, inner), _masked(optax, mask, inner)
    s_ours, s_theirs = ours.init(_params()), theirs.init(_params())
    _assert_same(s_ours, s_theirs)
    assert type(s_ours) is compat.MaskedState
    if inner == "adam":  # every mask here leaves out a slot
        assert "MaskedNode" in _layout(s_ours)


STEPPED = [(m, i, True) for m, i in CASES] + [("dict", "adam", False), ("prefix", "chain", False)]


@pytest.mark.parametrize(
    ("mask", "inner", "jit"), STEPPED, ids=[f"{m}-{i}-{'jit' if j else 'eager'}" for m, i, j in STEPPED]
)
def test_twenty_steps_equal_optax(mask, inner, jit):
    p_ours, s_ours = _run(compat, _masked(compat, mask, inner), jit)
    p_theirs, s_theirs = _run(optax, _masked(optax, mask, inner), jit)
    _assert_same(p_ours, p_theirs)
    _assert_same(s_ours, s_theirs)


@pytest.mark.parametrize("empty", [[], (), {}], ids=["list", "tuple", "dict"])
def test_empty_params_take_an_empty_mask(empty):
    for lib in (compat, optax):
        tx = lib.masked(lib.adam(1e-2), empty)
        updates, _ = tx.update(empty, tx.init(empty), empty)
        assert updates == empty and type(updates) is type(empty)
    assert _layout(compat.masked(compat.adam(1e-2), empty).init(empty)) == _layout(
        optax.masked(optax.adam(1e-2), empty).init(empty)
    )


@pytest.mark.parametrize("mask", ["dict", "prefix", "callable"])
def test_optax_tree_map_params_maps_the_slots_as_on_optax_s_state(mask):
    ours, theirs = _masked(compat, mask), _masked(optax, mask)
    (_, s_ours), (_, s_theirs) = (
        _run(compat, ours, jit=False, steps=2),
        _run(optax, theirs, jit=False, steps=2),
    )
    mapped = [
        optax.tree.map_params(tx, lambda v: 2 * v + 1, s) for tx, s in ((ours, s_ours), (theirs, s_theirs))
    ]
    _assert_same(*mapped)
    leaves = zip(jax.tree.leaves(mapped[0]), jax.tree.leaves(s_ours), strict=True)
    assert not all(jnp.allclose(a, b) for a, b in leaves)

    # optax's documented use with a tree like the params: MaskedNode a leaf, the other fields dropped
    specs = jax.tree.map(lambda p: jnp.full(p.shape, 7.0), _params())

    def with_specs(tx, state, lib):
        keep = lambda v, spec: v if isinstance(v, lib.MaskedNode) else spec  # noqa: E731
        is_masked = lambda v: isinstance(v, lib.MaskedNode)  # noqa: E731
        return optax.tree.map_params(
            tx, keep, state, specs, transform_non_params=lambda _: None, is_leaf=is_masked
        )

    _assert_same(with_specs(ours, s_ours, compat), with_specs(theirs, s_theirs, optax))


def test_masked_add_decayed_weights_and_adamw_s_chain_are_optax_s():
    """optax's `add_decayed_weights(wd, mask)` is `masked(add_decayed_weights(wd), mask)`: state included."""
    mask = MASKS["nested-prefix"]
    for jit in (True, False):
        p_ours, s_ours = _run(compat, compat.add_decayed_weights(0.1, mask), jit)
        p_theirs, s_theirs = _run(optax, optax.add_decayed_weights(0.1, mask), jit)
        _assert_same((p_ours, s_ours), (p_theirs, s_theirs))
        assert type(s_ours).__name__ == "MaskedState"
    chains = [
        lib.chain(lib.scale_by_adam(), lib.add_decayed_weights(0.1, mask), lib.scale_by_learning_rate(1e-2))
        for lib in (compat, optax)
    ]
    _assert_same(_run(compat, chains[0], jit=True), _run(optax, chains[1], jit=True))


def test_adamw_with_a_mask_has_optax_s_state():
    """optax's `adamw(mask=)` holds a masked `add_decayed_weights`: `MaskedState(EmptyState())`."""
    ours, theirs = (lib.adamw(1e-2, weight_decay=0.1, mask=MASKS["dict"]) for lib in (compat, optax))
    (p_ours, s_ours), (p_theirs, s_theirs) = _run(compat, ours, jit=True), _run(optax, theirs, jit=True)
    _assert_same((p_ours, s_ours), (p_theirs, s_theirs))
    _assert_same(
        optax.tree.map_params(ours, lambda v: v + 1, s_ours),
        optax.tree.map_params(theirs, lambda v: v + 1, s_theirs),
    )


def _scaled_by_extra_arg():
    """A stateless transform: the updates times the extra argument `scales` (like them) plus `shift`."""

    def update_fn(updates, state, params=None, *, scales, shift=0.0, **extra_args):
        del params, extra_args
        return jax.tree.map(lambda g, s: g * s + shift, updates, scales), state

    return optax.GradientTransformationExtraArgs(lambda params: optax.EmptyState(), update_fn)


def test_mask_compatible_extra_args_masks_an_extra_argument_shaped_like_the_params():
    params = _params()
    scales = jax.tree.map(lambda p: jnp.full(p.shape, 3.0), params)
    grads = _grads(0, params)
    outs = []
    for lib in (compat, optax):
        tx = lib.masked(_scaled_by_extra_arg(), MASKS["prefix"], mask_compatible_extra_args=True)
        updates, state = tx.update(grads, tx.init(params), params, scales=scales, shift=0.5)
        outs.append((updates, state))
    _assert_same(*outs)
    chex.assert_trees_all_close(outs[0][0]["b"], grads["b"] * 3.0 + 0.5)  # selected: scaled and shifted
    chex.assert_trees_all_close(outs[0][0]["w"], grads["w"])  # masked out: as it came

    unmasked = compat.masked(_scaled_by_extra_arg(), MASKS["prefix"])  # `scales` reaches inner whole
    with pytest.raises(ValueError, match="[Ss]tructure"):
        unmasked.update(grads, unmasked.init(params), params, scales=scales)


def test_the_state_round_trips_through_flax_and_reads_optax_s_checkpoint():
    (_, s_ours), (_, s_theirs) = (
        _run(lib, _masked(lib, "prefix"), jit=False, steps=3) for lib in (compat, optax)
    )
    target = _masked(compat, "prefix").init(_params())
    assert (
        flax.serialization.to_state_dict(s_ours).keys() == flax.serialization.to_state_dict(s_theirs).keys()
    )
    restored = flax.serialization.from_state_dict(target, flax.serialization.to_state_dict(s_ours))
    _assert_same(restored, s_ours)
    from_optax = flax.serialization.from_state_dict(target, flax.serialization.to_state_dict(s_theirs))
    _assert_same(from_optax, s_theirs)


def test_a_mask_that_does_not_fit_the_params_names_the_key_path():
    tx = compat.masked(compat.adam(1e-2), {"w": True, "b": False})
    with pytest.raises(TreeMismatchError, match="`masked`: `mask` and params must match.*\\['enc'\\]"):
        tx.init(_params())


def test_a_mask_that_is_no_mask_is_refused_at_construction():
    with pytest.raises(TypeError, match="`masked`: `mask` must be a tree of bools"):
        compat.masked(compat.adam(1e-2), "w")
    with pytest.raises(TypeError, match="`add_decayed_weights`: `mask` must be a tree of bools"):
        compat.add_decayed_weights(0.1, 3)
