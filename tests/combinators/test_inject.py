"""gradtx/combinators/_inject.py: hyperparameters as state, changed without recompiling."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers


def test_changing_an_injected_value_does_not_retrace():
    tx = gradtx.inject_hyperparams(gradtx.momentum)(learning_rate=0.1, momentum=0.9)
    traces = []

    @jax.jit
    def step(state, g):
        traces.append(1)
        return tx.update(g, state)

    state = tx.init(jnp.zeros(2))
    assert set(state.hyperparams) == {"learning_rate", "momentum"}
    u1, state = step(state, jnp.ones(2))
    state.hyperparams["learning_rate"] = jnp.asarray(0.0, jnp.float32)
    u2, state = step(state, jnp.ones(2))
    assert len(traces) == 1
    np.testing.assert_allclose(u1, [-0.1, -0.1], rtol=1e-6)
    np.testing.assert_array_equal(u2, [0.0, 0.0])


def test_schedules_are_evaluated_each_step_and_stored():
    tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=lambda count: 1.0 / (count + 1))
    state = tx.init(jnp.zeros(1))
    for expected in (1.0, 0.5, 1 / 3):
        u, state = tx.update(jnp.ones(1), state)
        assert float(u[0]) == pytest.approx(-expected)
        assert float(state.hyperparams["learning_rate"]) == pytest.approx(expected)


def test_static_arguments_and_positional_calls():
    tx = gradtx.inject_hyperparams(gradtx.rmsprop, static_args=("decay",))(0.1, 0.9, centered=True)
    state = tx.init(jnp.zeros(2))
    assert "decay" not in state.hyperparams and "learning_rate" in state.hyperparams
    plain = gradtx.rmsprop(0.1, 0.9, centered=True)
    a, _ = tx.update(jnp.ones(2), state)
    b, _ = plain.update(jnp.ones(2), plain.init(jnp.zeros(2)))
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_works_with_optax_factories():
    import optax

    tx = gradtx.inject_hyperparams(optax.adam)(learning_rate=0.1)
    u, state = tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
    np.testing.assert_allclose(u, [-0.1, -0.1], rtol=1e-5)
    assert "learning_rate" in state.hyperparams


def test_inject_errors():
    with pytest.raises(TypeError, match=r"`inject_hyperparams`: `factory` must be callable"):
        gradtx.inject_hyperparams(3)
    with pytest.raises(
        TypeError, match=r"`inject_hyperparams\(sgd\)`: missing a required argument: 'learning_rate'"
    ):
        gradtx.inject_hyperparams(gradtx.sgd)(lr=0.1)


@pytest.mark.parametrize("how", ["array", "python float", "numpy float", "update"])
def test_setting_a_hyperparameter_as_documented_never_retraces(how):
    chex.clear_trace_counter()  # chex counts by the function's code, across parametrized runs
    tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=0.1)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(state, g):
        return tx.update(g, state)

    state = tx.init(jnp.zeros(2))
    _, state = step(state, jnp.ones(2))  # compiled for the state as init and update make it
    for lr in (0.5, 0.25, 2.0):
        value = {"array": jnp.asarray(lr), "python float": lr, "numpy float": np.float32(lr), "update": lr}[
            how
        ]
        if how == "update":
            state.hyperparams.update(learning_rate=value)
        else:
            state.hyperparams["learning_rate"] = value
        assert state.hyperparams["learning_rate"].dtype == jnp.float32
        u, state = step(state, jnp.ones(2))
        np.testing.assert_allclose(u, [-lr, -lr], rtol=1e-6)
    assert step._cache_size() == 1  # not traced again (chex) and not compiled again (a weak type would)
    assert isinstance(state.hyperparams, dict)


def test_hyperparams_refuse_new_names_and_non_scalars():
    state = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=0.1).init(jnp.zeros(2))
    with pytest.raises(KeyError, match=r"'lr' is not an injected hyperparameter.*\['learning_rate'\]"):
        state.hyperparams["lr"] = 0.5
    for bad in (jnp.ones(2), "0.5", True, 1j, jax.random.key(0)):
        with pytest.raises(TypeError, match=r"hyperparams\['learning_rate'\] must be a real scalar"):
            state.hyperparams["learning_rate"] = bad


def test_hyperparams_round_trip_through_flax_optax_and_orbax_shaped_trees(tmp_path):
    import optax
    from flax import serialization

    tx = gradtx.inject_hyperparams(gradtx.adam)(learning_rate=0.1)
    state = tx.init({"w": jnp.ones(3)})
    state.hyperparams["learning_rate"] = 0.5
    restored = serialization.from_bytes(tx.init({"w": jnp.ones(3)}), serialization.to_bytes(state))
    assert type(restored.hyperparams) is type(state.hyperparams)
    assert float(restored.hyperparams["learning_rate"]) == 0.5
    assert float(optax.tree.get(state, "learning_rate")) == 0.5
    mapped = jax.tree.map(lambda x: x, state)
    assert jax.tree.structure(mapped) == jax.tree.structure(state)
    assert [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(state.hyperparams)][
        :1
    ] == ["['b1']"]


def test_prng_keys_ints_and_int_arrays_stay_static():
    import optax

    tx = gradtx.inject_hyperparams(optax.add_noise)(0.01, 0.55, jax.random.key(0))
    state = tx.init(jnp.zeros(3))
    assert set(state.hyperparams) == {"eta", "gamma"}
    plain = optax.add_noise(0.01, 0.55, jax.random.key(0))
    np.testing.assert_allclose(
        tx.update(jnp.ones(3), state)[0], plain.update(jnp.ones(3), plain.init(jnp.zeros(3)))[0], rtol=1e-6
    )
    seen = {}

    def factory(learning_rate: float, steps: jax.Array, key: jax.Array):
        seen.update(steps=steps, key=key)
        return gradtx.sgd(learning_rate)

    state = gradtx.inject_hyperparams(factory)(0.1, jnp.asarray(4), jax.random.key(1)).init(jnp.zeros(1))
    assert set(state.hyperparams) == {"learning_rate"}
    assert jax.dtypes.issubdtype(seen["key"].dtype, jax.dtypes.prng_key) and seen["steps"].dtype == jnp.int32


def test_static_args_are_exact_names_and_unknown_names_raise():
    def factory(b: float, b1: float):
        return gradtx.sgd(b + b1)

    state = gradtx.inject_hyperparams(factory, static_args="b1")(0.1, 0.2).init(jnp.zeros(1))
    assert set(state.hyperparams) == {"b"}  # "b1" is one name, not the letters b and 1
    state = gradtx.inject_hyperparams(factory, static_args=["b", "b1"])(0.1, 0.2).init(jnp.zeros(1))
    assert state.hyperparams == {}
    with pytest.raises(ValueError, match=r"`static_args` names \['decay_rate'\], which sgd does not take"):
        gradtx.inject_hyperparams(gradtx.sgd, static_args=("decay_rate",))
    with pytest.raises(ValueError, match=r"`static_args` names \['zeta'\], which per_leaf does not take"):
        gradtx.inject_hyperparams(gradtx.per_leaf, static_args="zeta")(
            lambda p: {}, lambda g, p, s, c, **h: (g, s), alpha=0.1
        )
    with pytest.raises(
        TypeError, match=r"`static_args` must be an argument name or an iterable of names, got 3"
    ):
        gradtx.inject_hyperparams(gradtx.sgd, static_args=3)


def test_legacy_keys_bool_and_complex_arrays_stay_static():
    seen = {}

    def factory(learning_rate: float, key: jax.Array, flag: jax.Array, phase: jax.Array, rate: float):
        seen.update(key=key, flag=flag, phase=phase)
        return gradtx.sgd(learning_rate * rate)

    key = jax.random.PRNGKey(0)  # uint32[2]
    args = (0.1, key, jnp.asarray(True), jnp.asarray(1j, jnp.complex64), np.float32(2.0))
    tx = gradtx.inject_hyperparams(factory)(*args)
    state = tx.init(jnp.zeros(1))
    assert set(state.hyperparams) == {"learning_rate", "rate"}
    np.testing.assert_array_equal(seen["key"], key)
    assert seen["key"].dtype == jnp.uint32 and seen["flag"].dtype == jnp.bool_
    assert seen["phase"].dtype == jnp.complex64
    np.testing.assert_allclose(tx.update(jnp.ones(1), state)[0], [-0.2], rtol=1e-6)


def test_setting_with_ior_setdefault_or_and_copy_keeps_hyperparams():
    chex.clear_trace_counter()
    tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=0.1)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(state, g):
        return tx.update(g, state)

    state = tx.init(jnp.zeros(2))
    _, state = step(state, jnp.ones(2))
    hyperparams = state.hyperparams  # (`state.hyperparams |= ...` would assign the NamedTuple's field)
    hyperparams |= {"learning_rate": 0.5}
    assert state.hyperparams["learning_rate"].dtype == jnp.float32
    np.testing.assert_allclose(step(state, jnp.ones(2))[0], [-0.5, -0.5], rtol=1e-6)
    for made in (state.hyperparams.copy(), state.hyperparams | {"learning_rate": 0.25}):
        assert type(made) is type(state.hyperparams)
    state = state._replace(hyperparams=state.hyperparams | {"learning_rate": 0.25})
    np.testing.assert_allclose(step(state, jnp.ones(2))[0], [-0.25, -0.25], rtol=1e-6)
    assert state.hyperparams.setdefault("learning_rate", 9.0) == 0.25
    with pytest.raises(KeyError, match=r"'lr' is not an injected hyperparameter"):
        state.hyperparams.setdefault("lr", 0.5)
    assert set(state.hyperparams) == {"learning_rate"}


def test_state_survives_deepcopy_and_pickle():
    import copy
    import pickle

    tx = gradtx.inject_hyperparams(gradtx.adam)(learning_rate=0.1)
    state = tx.init({"w": jnp.ones(3)})
    state.hyperparams["learning_rate"] = 0.5
    for restored in (copy.deepcopy(state), pickle.loads(pickle.dumps(state))):
        assert type(restored.hyperparams) is type(state.hyperparams)
        assert jax.tree.structure(restored) == jax.tree.structure(state)
        chex.assert_trees_all_equal(restored, state)
        restored.hyperparams["learning_rate"] = 0.25  # still casts and refuses new names
        assert restored.hyperparams["learning_rate"].dtype == jnp.float32
        with pytest.raises(KeyError, match=r"'lr' is not an injected hyperparameter"):
            restored.hyperparams["lr"] = 0.5


@pytest.mark.parametrize("how", ["_replace", "optax.tree.set"])
def test_a_plain_dict_in_the_state_traces_once_more_then_never(how):
    import optax

    chex.clear_trace_counter()
    tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=0.1)

    @jax.jit
    @chex.assert_max_traces(n=2)  # once for the state as init makes it, once for a plain dict
    def step(state, g):
        return tx.update(g, state)

    state = tx.init(jnp.zeros(2))
    _, state = step(state, jnp.ones(2))
    for lr in (0.5, 0.25, 2.0):
        if how == "_replace":
            state = state._replace(hyperparams={"learning_rate": lr})
        else:
            state = optax.tree.set(state, learning_rate=lr)
        assert type(state.hyperparams) is dict
        u, state = step(state, jnp.ones(2))
        np.testing.assert_allclose(u, [-lr, -lr], rtol=1e-6)
        assert type(state.hyperparams) is not dict and state.hyperparams["learning_rate"].dtype == jnp.float32
        _, state = step(state, jnp.ones(2))  # the state a step returns: the first trace again
    assert step._cache_size() == 2


WRAPPERS = {
    "apply_if_finite": lambda inner: gradtx.apply_if_finite(inner, 3),
    "accumulate_gradients": lambda inner: gradtx.accumulate_gradients(inner, every_k=2),
    "chain": lambda inner: gradtx.chain(gradtx.scale(2.0), inner),
    "masked": lambda inner: gradtx.masked(inner, {"w": True, "b": False}),
    "partition": lambda inner: gradtx.partition({"a": inner, "b": gradtx.sgd(0.25)}, {"w": "a", "b": "b"}),
    "conditionally_transform": lambda inner: gradtx.conditionally_transform(
        inner, lambda count: count % 2 == 1
    ),
}


@pytest.mark.parametrize("factory", [gradtx.sgd, gradtx.adam], ids=["sgd", "adam"])
@pytest.mark.parametrize("wrapper", list(WRAPPERS), ids=list(WRAPPERS))
def test_optax_tree_set_on_a_wrapped_state_sets_the_rate_of_the_next_step(wrapper, factory):
    """`optax.tree.set(state, learning_rate=...)` (a plain dict in place of `Hyperparams`) inside a wrapper
    that keeps the inner state at skipped steps: the next jitted step runs with the new value."""
    import optax

    chex.clear_trace_counter()
    wrap = WRAPPERS[wrapper]
    tx = wrap(gradtx.inject_hyperparams(factory)(learning_rate=0.1))
    reference = wrap(factory(0.5))  # the rate set before every step
    params = {"w": jnp.linspace(-1.0, 1.0, 3), "b": jnp.ones(2)}
    rng = np.random.default_rng(0)
    grads = [
        jax.tree.map(lambda p: jnp.asarray(rng.standard_normal(p.shape), p.dtype), params) for _ in range(6)
    ]

    @jax.jit
    @chex.assert_max_traces(n=1)  # every call gets the state `optax.tree.set` made: one trace
    def step(g, state, params):
        return tx.update(g, state, params)

    state, ref_state = tx.init(params), reference.init(params)
    moved = 0
    for g in grads:
        state = optax.tree.set(state, learning_rate=0.5)
        assert type(optax.tree.get(state, "learning_rate")) is float
        u, state = step(g, state, params)
        v, ref_state = reference.update(g, ref_state, params)
        helpers.assert_trees_close(u, v, rtol=1e-6, atol=1e-7)
        moved += bool(jnp.any(u["w"] != 0))
        assert float(optax.tree.get(state, "learning_rate")) == 0.5
    assert moved >= 3  # the injected rule ran (and used 0.5) at three steps at least
