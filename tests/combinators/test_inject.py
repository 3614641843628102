"""gradtx/combinators/_inject.py: hyperparameters as state, changed without recompiling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx


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
