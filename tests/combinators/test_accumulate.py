"""gradtx/combinators/_accumulate.py: accumulate_gradients (optax's MultiSteps), apply_if_finite."""

import functools
import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import helpers
from tests.parallel import _util

DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]


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
    assert int(state.count) == 2 and int(state.mini_step) == 0
    np.testing.assert_array_equal(state.accumulator["w"], 0.0)


def _scan(tx, params, grads):
    """Every step inside one `lax.scan` (the state is the carry: its types must not change)."""

    def body(carry, g):
        p, s = carry
        u, s = tx.update(g, s, p)
        return (gradtx.apply_updates(p, u), s), p

    (p, s), trajectory = jax.jit(lambda p, g: jax.lax.scan(body, (p, tx.init(p)), g))(params, grads)
    return trajectory, p, s


@pytest.mark.parametrize("param_dtype, grad_dtype", list(itertools.product(DTYPES, DTYPES)))
def test_every_dtype_pair_accumulates_inside_scan_as_optax_multisteps(param_dtype, grad_dtype):
    params = {"w": jnp.linspace(-1.0, 1.0, 6, dtype=param_dtype), "b": jnp.ones(2, param_dtype)}
    rng = np.random.default_rng(0)
    grads = {k: jnp.asarray(rng.standard_normal((7, *v.shape)), grad_dtype) for k, v in params.items()}
    ours, final, state = _scan(gradtx.accumulate_gradients(gradtx.sgd(0.5), every_k=3), params, grads)
    theirs, _, _ = _scan(optax.MultiSteps(optax.sgd(0.5), every_k_schedule=3), params, grads)
    tol = 1e-6 if param_dtype == jnp.float32 else 1e-2
    helpers.assert_trees_close(ours, theirs, rtol=tol, atol=tol)
    chex.assert_trees_all_equal_dtypes(final, params)
    assert int(state.count) == 2 and int(state.mini_step) == 1
    chex.assert_trees_all_equal_dtypes(state.accumulator, jax.tree.map(lambda _: jnp.zeros(1), params))


def test_has_updated_the_sum_and_the_skip_hooks_as_optax():
    params = jnp.zeros(3)
    grads = [jnp.array([1.0, 2.0, 3.0]), jnp.array([jnp.nan, 0.0, 1.0]), jnp.ones(3), 2 * jnp.ones(3)]
    for use_mean, skip in itertools.product([True, False], [gradtx.skip_not_finite, None]):
        ours = gradtx.accumulate_gradients(
            gradtx.sgd(1.0), 2, use_grad_mean=use_mean, should_skip_update_fn=skip
        )
        theirs = optax.MultiSteps(
            optax.sgd(1.0), 2, use_grad_mean=use_mean, should_skip_update_fn=skip and optax.skip_not_finite
        )
        s, t = ours.init(params), theirs.init(params)
        # Without a skip hook the NaN is applied at step 2; optax's accumulator keeps it afterwards
        # (its reset multiplies by zero), ours starts again from zero: compare up to there.
        for g in grads if skip is not None else grads[:2]:
            u, s = ours.update(g, s, params)
            v, t = theirs.update(g, t, params)
            np.testing.assert_allclose(u, v)
            assert bool(gradtx.has_updated(s)) == bool(theirs.has_updated(t))
        if skip is None:
            for g in grads[2:]:
                u, s = ours.update(g, s, params)
            np.testing.assert_allclose(u, -1.5 if use_mean else -3.0)  # the NaN did not stick
        else:
            assert int(s.skip_state["num_not_finite"]) == 0 and int(s.count) == 1  # the NaN one was dropped


def test_skip_large_updates_drops_a_large_gradient():
    skip = functools.partial(gradtx.skip_large_updates, max_squared_norm=10.0)
    tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), 1, should_skip_update_fn=skip)
    s = tx.init(jnp.zeros(2))
    u, s = tx.update(jnp.array([3.0, 4.0]), s)
    np.testing.assert_array_equal(u, [0.0, 0.0])
    assert float(s.skip_state["norm_squared"]) == 25.0 and int(s.count) == 0
    u, s = tx.update(jnp.array([1.0, 1.0]), s)
    np.testing.assert_array_equal(u, [-1.0, -1.0])


def test_a_missing_gradient_keeps_its_accumulator_and_the_step_does_not_retrace():
    tx = gradtx.accumulate_gradients(gradtx.momentum(0.1, 0.9), every_k=2)
    params = {"a": jnp.ones(2), "b": jnp.ones(3)}
    state = tx.init(params)
    step = jax.jit(chex.assert_max_traces(lambda g, s: tx.update(g, s, params), n=2))
    _, state = step({"a": jnp.ones(2), "b": jnp.ones(3)}, state)
    u, state2 = step({"a": jnp.ones(2), "b": None}, state)  # b has no gradient this time (a new trace)
    chex.assert_trees_all_equal_structs(state2, state)
    np.testing.assert_array_equal(state2.inner_state[0].momentum["b"], state.inner_state[0].momentum["b"])
    assert u["b"] is None
    _, state3 = step({"a": jnp.ones(2), "b": jnp.ones(3)}, state2)  # and the full tree again: no retrace
    chex.assert_trees_all_equal_structs(state3, state)


def test_the_applied_update_count_saturates_and_accumulation_goes_on():
    tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=2)
    state = tx.init(jnp.zeros(1))._replace(count=jnp.asarray(2**31 - 1, jnp.int32))
    outs = []
    for _ in range(4):
        u, state = tx.update(jnp.ones(1), state)
        outs.append(float(u[0]))
    assert outs == [0.0, -1.0, 0.0, -1.0] and int(state.count) == 2**31 - 1


@pytest.mark.parametrize("mode", ["vma", "pmap"])
def test_apply_if_finite_around_cross_shard_skips_on_every_replica(mode):
    """A NaN on one replica: the averaged update is NaN everywhere, so every replica skips it."""
    tx = gradtx.apply_if_finite(gradtx.parallel.cross_shard(gradtx.adam(0.1), _util.AXIS), 3)
    data = np.ones((2, _util.N, 3), np.float32)
    data[0, 3, 1] = np.nan  # step 1, replica 3
    params, observed = _util.run(
        tx, jnp.zeros(3), jnp.asarray(data), mode=mode, observe=lambda s: s.total_notfinite
    )
    np.testing.assert_array_equal(observed, 1)  # every replica counted the skipped step, and only it
    np.testing.assert_array_equal(params[:, 0], 0.0)  # step 1 moved no replica
    np.testing.assert_allclose(params[:, 1], -0.1, rtol=1e-6)  # step 2 moved all of them alike


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
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 2**40},
            ValueError,
            r"`accumulate_gradients`: `every_k` must be <= 2147483647",
        ),
        (
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 2, "accumulator_dtype": jnp.int32},
            TypeError,
            r"`accumulate_gradients`: `accumulator_dtype` must be None or a floating-point dtype",
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
