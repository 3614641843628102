"""Every registered factory's state is a plain tree of per-leaf NamedTuples, as optax's: it goes through
`optax.tree.map_params`, `optax.tree.get`, `flax.serialization`, orbax and npz, and a restored state
resumes bit-identically."""

from __future__ import annotations

import functools

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest

import gradtx
from gradtx import packing
from tests import catalog, helpers
from tests.test_contract import ENTRIES, _build, _grads, _params

UNMAPPED = [e for e in ENTRIES if "axis_name" not in e.example]  # the parallel wrappers need a mapped axis
BY_ENTRY = pytest.mark.parametrize("entry", UNMAPPED, ids=[e.name for e in UNMAPPED])


@functools.cache
def _trained_by_name(name):
    entry = catalog.entry(name)
    tx = _build(entry)
    params = _params()
    _, state = helpers.run(
        tx, params, [_grads(params, 1), _grads(params, 2)], extra_args_seq=[entry.extra(0), entry.extra(1)]
    )
    return tx, params, state


def _trained(entry):
    """The transform, its params and its state after two steps (slots away from their initial values)."""
    return _trained_by_name(entry.name)


def _resumes_like(entry, tx, params, restored, state):
    """One more step from `restored` gives the numbers of one more step from `state`, bit for bit."""

    def step(s):  # eager (no compilation per format and entry), on jax arrays: a loader may give
        # NumPy arrays, and eager NumPy arithmetic may round differently from XLA's in the last bit
        return tx.update(_grads(params, 3), jax.tree.map(jnp.asarray, s), params, **entry.extra(2))

    helpers.assert_trees_close(step(restored), step(state), rtol=0, atol=0)


def _is_params_copy(tree, params) -> bool:
    def is_none(x):
        return x is None

    return jax.tree.structure(tree, is_leaf=is_none) == jax.tree.structure(params, is_leaf=is_none) and [
        jnp.shape(x) for x in jax.tree.leaves(tree)
    ] == [jnp.shape(x) for x in jax.tree.leaves(params)]


@BY_ENTRY
def test_states_hold_no_packed_layout(entry):
    state = _build(entry).init(_params())
    assert not any(packing.is_packed(x) for x in jax.tree.leaves(state, is_leaf=packing.is_packed))


@BY_ENTRY
def test_optax_tree_map_params_maps_the_slots_and_leaves_the_rest(entry):
    tx, params, state = _trained(entry)
    mapped = optax.tree.map_params(tx, lambda v: v + 1, state)
    assert jax.tree.structure(mapped) == jax.tree.structure(state)
    for name in gradtx.slot_names(state):
        before, after = gradtx.get_slot(state, name), gradtx.get_slot(mapped, name)
        if _is_params_copy(before, params):  # a copy of the param tree (not per-dimension statistics)
            helpers.assert_trees_close(after, jax.tree.map(lambda v: v + 1, before), rtol=0, atol=0, msg=name)
    after = dict(jax.tree_util.tree_flatten_with_path(mapped)[0])
    for key, value in jax.tree_util.tree_flatten_with_path(state)[0]:  # counters are not copies of the params
        if jax.tree_util.keystr(key).endswith(".count"):
            np.testing.assert_array_equal(after[key], value)


@BY_ENTRY
def test_optax_tree_get_finds_every_slot(entry):
    _, _, state = _trained(entry)
    for name in gradtx.slot_names(state):
        try:
            found = optax.tree.get(state, name)
        except KeyError:  # several transforms keep a slot of that name (a partition): gradtx merges them
            assert len(optax.tree_utils.tree_get_all_with_path(state, name)) > 1
            continue
        helpers.assert_trees_close(found, gradtx.get_slot(state, name), rtol=0, atol=0, msg=name)


@BY_ENTRY
def test_flax_serialization_round_trips_and_resumes(entry):
    tx, params, state = _trained(entry)
    restored = flax.serialization.from_bytes(tx.init(params), flax.serialization.to_bytes(state))
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    _resumes_like(entry, tx, params, restored, state)


@BY_ENTRY
def test_npz_round_trips_and_resumes(entry, tmp_path):
    tx, params, state = _trained(entry)
    gradtx.checkpoint.save_npz(tmp_path / "state.npz", state)
    restored = gradtx.checkpoint.load_npz(tmp_path / "state.npz", jax.eval_shape(tx.init, params))
    _resumes_like(entry, tx, params, restored, state)


_ORBAX = [
    e for e in UNMAPPED if e.kind == "optimizer" and e.name != "galore"
]  # orbax is slow to start: the optimizers, and two wrappers; not GaLore, whose state holds an empty
# projector for each leaf it does not project (as optax's), and orbax refuses to save arrays of size 0
_ORBAX += [e for e in UNMAPPED if e.name in ("inject_hyperparams", "partition")]


@pytest.mark.parametrize("entry", _ORBAX, ids=[e.name for e in _ORBAX])
def test_orbax_round_trips_and_resumes(entry, tmp_path):
    tx, params, state = _trained(entry)
    item = {"params": params, "opt_state": state}  # what a training run saves (orbax refuses an empty tree)
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "state", item)
        checkpointer.wait_until_finished()
        restored = checkpointer.restore(tmp_path / "state", jax.eval_shape(lambda: item))
    assert jax.tree.structure(restored) == jax.tree.structure(item)
    _resumes_like(entry, tx, params, restored["opt_state"], state)
