"""`gradtx.tree.get` / `get_all_with_path` / `set` / `map_params` on the states of optax, optax_compat and
gradtx (hyperparameters injected inside `apply_if_finite`, `MultiSteps`, `chain`, accumulation), found and
replaced as `optax.tree` finds and replaces them, and their errors."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
import gradtx.optax_compat as compat
from gradtx import TreeMismatchError
from gradtx.tree import _state

optax = pytest.importorskip("optax")

PARAMS = {"w": jnp.linspace(-1.0, 1.0, 3), "b": jnp.ones(2)}


def _inject(lib, factory, **kwargs):
    return lib.inject_hyperparams(factory)(**kwargs)


TRANSFORMS = {
    "optax-MultiSteps-chain": lambda: optax.MultiSteps(
        optax.chain(
            optax.clip_by_global_norm(1.0), _inject(optax, optax.sgd, learning_rate=0.1, momentum=0.9)
        ),
        2,
    ),
    "compat-apply_if_finite": lambda: compat.apply_if_finite(
        _inject(compat, compat.adam, learning_rate=0.1), 3
    ),
    "compat-MultiSteps-chain": lambda: compat.MultiSteps(
        compat.chain(
            compat.clip_by_global_norm(1.0), _inject(compat, compat.sgd, learning_rate=0.1, momentum=0.9)
        ),
        2,
    ),
    "compat-schedule": lambda: _inject(
        compat, compat.adamw, learning_rate=compat.linear_schedule(0.1, 0.0, 10)
    ),
    "compat-masked": lambda: compat.chain(
        compat.masked(compat.adam(0.1), {"w": True, "b": False}), compat.add_decayed_weights(0.1)
    ),
    "gradtx-masked": lambda: gradtx.masked(gradtx.adam(0.1), {"w": True, "b": False}),
    "gradtx-inject": lambda: _inject(gradtx, gradtx.adam, learning_rate=0.1),
    "gradtx-apply_if_finite": lambda: gradtx.apply_if_finite(
        _inject(gradtx, gradtx.adam, learning_rate=0.1), 3
    ),
    "gradtx-accumulate-chain": lambda: gradtx.accumulate_gradients(
        gradtx.chain(gradtx.scale(2.0), _inject(gradtx, gradtx.sgd, learning_rate=0.1)), every_k=2
    ),
    "gradtx-partition": lambda: gradtx.partition(
        {"a": _inject(gradtx, gradtx.rmsprop, learning_rate=0.1), "b": gradtx.adagrad(0.25)},
        {"w": "a", "b": "b"},
    ),
}


def _state_after_a_step(name):
    tx = TRANSFORMS[name]()
    state = tx.init(PARAMS)
    return tx, tx.update(jax.tree.map(jnp.ones_like, PARAMS), state, PARAMS)[1]


def _path(path):
    """A key path as comparable values: optax's `NamedTupleKey` and gradtx's give the same tuple."""
    return tuple(
        (e.tuple_name, e.name) if hasattr(e, "tuple_name") else (type(e).__name__, jax.tree_util.keystr((e,)))
        for e in path
    )


def _assert_same(ours, theirs):
    """Equal structure (container types included), leaf types and values."""
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        assert type(a) is type(b) and jnp.result_type(a) == jnp.result_type(b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_get_all_with_path_and_get_find_every_name_where_optax_does(name):
    _, state = _state_after_a_step(name)
    names = _state._names(state)
    assert {"count", "inner_state"} & set(names) or name == "gradtx-partition"
    for key in names:
        ours, theirs = gradtx.tree.get_all_with_path(state, key), optax.tree.get_all_with_path(state, key)
        assert [_path(p) for p, _ in ours] == [_path(p) for p, _ in theirs], key
        assert [jax.tree_util.keystr(p) for p, _ in ours] == [jax.tree_util.keystr(p) for p, _ in theirs]
        _assert_same([v for _, v in ours], [v for _, v in theirs])
        if len(theirs) == 1:
            _assert_same(gradtx.tree.get(state, key), optax.tree.get(state, key))
        else:
            with pytest.raises(KeyError, match=rf"`gradtx.tree.get`: {len(theirs)} values are named '{key}'"):
                gradtx.tree.get(state, key)
    assert gradtx.tree.get(state, "no_such_name", default=7) == 7


def _arrays_only(path, value):
    return isinstance(value, jax.Array)


def _in_adam_state(path, value):
    return bool(path) and getattr(path[-1], "tuple_name", None) == "ScaleByAdamState"


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_set_replaces_what_optax_s_set_replaces(name):
    _, state = _state_after_a_step(name)
    for key in _state._names(state):
        if not key.isidentifier():
            continue
        for filtering in (None, _arrays_only, _in_adam_state):
            args = () if filtering is None else (filtering,)
            try:
                theirs = optax.tree.set(state, *args, **{key: jnp.asarray(-1.0)})
            except KeyError:
                with pytest.raises(KeyError, match=rf"`gradtx.tree.set`: nothing named '{key}'"):
                    gradtx.tree.set(state, *args, **{key: jnp.asarray(-1.0)})
                continue
            _assert_same(gradtx.tree.set(state, *args, **{key: jnp.asarray(-1.0)}), theirs)
    if "learning_rate" in _state._names(state):
        both = {"learning_rate": 0.01, "count": jnp.asarray(5)}
        _assert_same(gradtx.tree.set(state, **both), optax.tree.set(state, **both))
        ours = gradtx.tree.set(state, learning_rate=0.01)
        _assert_same(ours, optax.tree.set(state, learning_rate=0.01))
        values = [v for _, v in gradtx.tree.get_all_with_path(ours, "learning_rate")]
        assert 0.01 in values and type(values[values.index(0.01)]) is float  # as given, as optax stores it


def test_set_on_gradtx_s_hyperparams_gives_optax_s_plain_dict_and_the_next_jitted_step_uses_it():
    chex.clear_trace_counter()
    tx = gradtx.apply_if_finite(_inject(gradtx, gradtx.adam, learning_rate=0.1), 3)
    reference = gradtx.apply_if_finite(gradtx.adam(0.02), 3)
    state, ref_state = tx.init(PARAMS), reference.init(PARAMS)
    assert type(state.inner_state.hyperparams) is not dict  # gradtx's `Hyperparams`

    @jax.jit
    @chex.assert_max_traces(n=1)  # each call gets the state `set` made
    def step(g, state):
        return tx.update(g, state, PARAMS)

    for scale in (1.0, 2.0, 3.0):
        g = gradtx.tree.scale(scale, gradtx.tree.ones_like(PARAMS))
        state = gradtx.tree.set(state, learning_rate=0.02)
        assert type(state.inner_state.hyperparams) is dict
        (u, state), (v, ref_state) = step(g, state), reference.update(g, ref_state, PARAMS)
        chex.assert_trees_all_close(u, v, rtol=1e-6, atol=1e-7)
    assert float(gradtx.tree.get(state, "learning_rate")) == pytest.approx(0.02)


def test_set_does_not_go_below_a_matched_node_through_children_without_the_name_as_optax():
    """optax's walk: `count` of an inject state is set; the `count` inside its `inner_state` tuple is not."""
    for lib in (optax, compat):
        state = _inject(lib, lib.adam, learning_rate=0.1).init(PARAMS)
        new = gradtx.tree.set(state, count=jnp.asarray(5))
        assert int(new.count) == 5 and int(new.inner_state[0].count) == 0
        _assert_same(new, optax.tree.set(state, count=jnp.asarray(5)))


def test_get_and_set_a_whole_named_tuple_by_its_class_name():
    state = compat.chain(compat.scale_by_adam(), compat.scale(-0.1)).init(PARAMS)
    adam = gradtx.tree.get(state, "ScaleByAdamState")
    assert isinstance(adam, compat.ScaleByAdamState)
    new = gradtx.tree.set(state, ScaleByAdamState=adam._replace(count=jnp.asarray(3)))
    assert int(new[0].count) == 3
    _assert_same(new, optax.tree.set(state, ScaleByAdamState=adam._replace(count=jnp.asarray(3))))


def test_set_and_get_errors_name_the_function_the_key_and_what_exists():
    state = _inject(compat, compat.adam, learning_rate=0.1).init(PARAMS)
    with pytest.raises(
        KeyError, match=r"`gradtx.tree.set`: nothing named 'learning_rat' in the tree.*learning_rate"
    ):
        gradtx.tree.set(state, learning_rate=0.1, learning_rat=0.2)
    with pytest.raises(KeyError, match=r"nothing named 'mu' that `filtering` accepts"):
        gradtx.tree.set(state, lambda path, value: False, mu=0.2)
    with pytest.raises(
        KeyError, match=r"2 values are named 'count' \(InjectStatefulHyperparamsState.count, "
    ):
        gradtx.tree.get(state, "count")
    assert int(gradtx.tree.get(state, "count", filtering=_in_adam_state)) == 0
    assert gradtx.tree.get_all_with_path(state, "count", lambda p, v: False) == []


# --------------------------------------------------------------------------- map_params


MAP_CASES = ["compat-masked", "optax-MultiSteps-chain", "gradtx-accumulate-chain", "gradtx-masked"]


@pytest.mark.parametrize("name", MAP_CASES)
def test_map_params_maps_the_slots_as_optax_s(name):
    tx, state = _state_after_a_step(name)
    _assert_same(
        gradtx.tree.map_params(tx, lambda v: 2 * v + 1, state),
        optax.tree.map_params(tx, lambda v: 2 * v + 1, state),
    )
    specs = jax.tree.map(lambda p: jnp.full(p.shape, 7.0), PARAMS)
    is_masked = lambda v: v is None or isinstance(v, (compat.MaskedNode, optax.MaskedNode))  # noqa: E731

    def keep_masked(v, spec):
        return v if is_masked(v) else spec

    ours, theirs = (
        lib.map_params(
            tx.init, keep_masked, state, specs, transform_non_params=lambda _: None, is_leaf=is_masked
        )
        for lib in (gradtx.tree, optax.tree)
    )
    _assert_same(ours, theirs)
    assert jax.tree.leaves(ours) and all(float(x.ravel()[0]) == 7.0 for x in jax.tree.leaves(ours) if x.size)


def test_map_params_refuses_a_state_of_another_transform():
    state = compat.adam(0.1).init(PARAMS)
    with pytest.raises(
        TreeMismatchError, match=r"`gradtx.tree.map_params`: the state `initable` makes and state"
    ):
        gradtx.tree.map_params(compat.sgd(0.1, momentum=0.9), lambda v: v, state)
