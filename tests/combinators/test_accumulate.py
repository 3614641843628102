"""gradtx/combinators/_accumulate.py: accumulate_gradients, apply_if_finite."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers


def test_accumulating_k_small_batches_equals_one_step_on_their_mean():
    params = {"w": jnp.arange(3.0)}
    grads = [{"w": jnp.array([1.0, -2.0, 0.5]) * (i + 1)} for i in range(6)]
    acc, state = helpers.run(gradtx.accumulate_gradients(gradtx.adam(0.1), every_k=3), params, grads)
    means = [jax.tree.map(lambda *g: sum(g) / 3, *grads[i : i + 3]) for i in (0, 3)]
    big, _ = helpers.run(gradtx.adam(0.1), params, means)
    helpers.assert_trees_close(acc[1], params, rtol=0, atol=0)  # nothing applied before the 3rd
    helpers.assert_trees_close(acc[2], big[0], rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(acc[5], big[1], rtol=1e-6, atol=1e-7)
    assert int(state.inner_state[0].count) == 2  # the inner optimizer advanced once per applied update
    np.testing.assert_array_equal(state.accumulator["w"], 0.0)


def test_apply_if_finite_skips_bad_steps_and_keeps_the_inner_state():
    tx = gradtx.apply_if_finite(gradtx.momentum(0.1, 0.9), max_consecutive_errors=2)
    state = tx.init(jnp.zeros(2))
    _, state = tx.update(jnp.ones(2), state)
    good_inner = state.inner_state
    u, state = tx.update(jnp.array([jnp.nan, 1.0]), state)
    np.testing.assert_array_equal(u, [0.0, 0.0])
    helpers.assert_trees_close(state.inner_state, good_inner, rtol=0, atol=0)
    assert int(state.notfinite_count) == 1 and not bool(state.last_finite) and int(state.total_notfinite) == 1
    u, state = tx.update(jnp.ones(2), state)
    assert int(state.notfinite_count) == 0 and bool(jnp.all(u != 0))


def test_apply_if_finite_applies_after_too_many_consecutive_errors():
    tx = gradtx.apply_if_finite(gradtx.sgd(1.0), max_consecutive_errors=1)
    state = tx.init(jnp.zeros(1))
    u1, state = tx.update(jnp.array([jnp.inf]), state)
    u2, state = tx.update(jnp.array([jnp.inf]), state)
    assert float(u1[0]) == 0.0 and bool(jnp.isinf(u2[0]))
    assert int(state.total_notfinite) == 2


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 0},
            ValueError,
            r"`accumulate_gradients`: `every_k` must be >= 1, got 0",
        ),
        (
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 2.0},
            TypeError,
            r"`every_k` must be an integer, got 2.0",
        ),
        (
            gradtx.accumulate_gradients,
            {"tx": None, "every_k": 2},
            TypeError,
            r"`accumulate_gradients`: `tx` must be a gradient transformation",
        ),
        (
            gradtx.apply_if_finite,
            {"tx": gradtx.sgd(0.1), "max_consecutive_errors": -1},
            ValueError,
            r"`apply_if_finite`: `max_consecutive_errors` must be >= 0, got -1",
        ),
    ],
)
def test_errors(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**kwargs)
