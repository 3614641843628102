"""The protocol is optax's: gradtx inside optax.chain and Flax TrainState, optax inside gradtx.chain."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training import train_state

import gradtx
from tests import catalog, helpers

PARAMS = {"w": jnp.array([[1.0, -2.0], [0.5, 3.0]]), "b": jnp.array([0.1, -0.1])}


def _grads(seed):
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda p: jnp.asarray(rng.standard_normal(p.shape), p.dtype), PARAMS)


GRADS = [_grads(s) for s in range(5)]


def test_gradtx_transform_inside_optax_chain():
    mixed = optax.chain(optax.clip_by_global_norm(1.0), gradtx.momentum(0.1, 0.9, nesterov=True))
    native = gradtx.chain(optax.clip_by_global_norm(1.0), gradtx.momentum(0.1, 0.9, nesterov=True))
    a, _ = helpers.run(mixed, PARAMS, GRADS)
    b, _ = helpers.run(native, PARAMS, GRADS)
    helpers.assert_trees_close(a, b, rtol=0, atol=0)

    def clip_to_unit_norm(gs):
        n = optax.tree.norm(gs)
        return jax.tree.map(lambda g: g * jnp.minimum(1.0, 1.0 / n), gs)

    clipped = [clip_to_unit_norm(gs) for gs in GRADS]
    c, _ = helpers.run(gradtx.momentum(0.1, 0.9, nesterov=True), PARAMS, clipped)
    helpers.assert_trees_close(a, c, rtol=1e-6, atol=1e-7)


def test_optax_transform_inside_gradtx_chain_equals_optax():
    ours = gradtx.chain(optax.scale_by_adam(b1=0.9, b2=0.99), gradtx.scale_by_learning_rate(0.01))
    a, _ = helpers.run(ours, PARAMS, GRADS)
    b, _ = helpers.run(optax.adam(0.01, b1=0.9, b2=0.99), PARAMS, GRADS)
    helpers.assert_trees_close(a, b, rtol=1e-6, atol=1e-7)


def test_extra_args_pass_through_a_chain_with_an_optax_member():
    tx = gradtx.chain(optax.scale(2.0), gradtx.sgd(0.1))
    u, _ = tx.update(GRADS[0], tx.init(PARAMS), PARAMS, global_step=jnp.asarray(3))
    helpers.assert_trees_close(u, jax.tree.map(lambda g: -0.2 * g, GRADS[0]), rtol=1e-6)


def test_gradtx_optimizer_in_flax_train_state():
    tx = gradtx.momentum(0.05, 0.9)
    ts = train_state.TrainState.create(apply_fn=None, params=PARAMS, tx=tx)
    step = jax.jit(lambda ts, g: ts.apply_gradients(grads=g))
    for g in GRADS:
        ts = step(ts, g)
    expected, state = helpers.run(tx, PARAMS, GRADS, jit=True)  # as the jitted train step
    helpers.assert_trees_close(ts.params, expected[-1], rtol=0, atol=0)
    helpers.assert_trees_close(ts.opt_state, state, rtol=0, atol=0)
    assert int(ts.step) == len(GRADS)


def test_optax_apply_updates_accepts_gradtx_updates():
    tx = gradtx.sgd(0.1)
    u, _ = tx.update(GRADS[0], tx.init(PARAMS), PARAMS)
    helpers.assert_trees_close(
        optax.apply_updates(PARAMS, u), gradtx.apply_updates(PARAMS, u), rtol=0, atol=0
    )


ENTRIES = catalog.entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_every_registered_transform_inside_optax_chain_and_multisteps_keeps_its_extra_args(entry):
    """optax forwards extra arguments only to `GradientTransformationExtraArgs`: a gradtx transform is one
    (when optax is installed), so `optax.chain(tx)` and `optax.MultiSteps(tx, 1)` step exactly as `tx`."""
    from tests import test_contract as contract

    tx = contract._build(entry)
    assert isinstance(tx, optax.GradientTransformationExtraArgs)
    params = contract._params()
    grads = [contract._grads(params, seed) for seed in (1, 2)]

    def run(t):
        p, s = params, t.init(params)
        for i, g in enumerate(grads):
            u, s = t.update(g, s, p, **entry.extra(i))
            p = gradtx.apply_updates(p, u)
        return p

    bare, chained, multi = jax.jit(
        lambda: (run(tx), run(optax.chain(tx)), run(optax.MultiSteps(tx, every_k_schedule=1)))
    )()
    chex.assert_trees_all_close(chained, bare, rtol=0, atol=0)
    chex.assert_trees_all_close(multi, bare, rtol=1e-6, atol=1e-7)


def test_the_issues_two_cases_inside_optax():
    """reg_adagrad's `update_slots=False` keeps the accumulator; AdamGS gets its global step."""
    tx = optax.chain(gradtx.reg_adagrad(1.0, initial_accumulator_value=4.0))
    _, state = tx.update(jnp.ones(1), tx.init(jnp.zeros(1)), jnp.zeros(1), update_slots=False)
    np.testing.assert_array_equal(gradtx.get_slot(state, "accumulator"), [4.0])
    multi = optax.MultiSteps(gradtx.adam_gs(0.1), 2)
    params, state = jnp.zeros(1), multi.init(jnp.zeros(1))
    for _ in range(2):  # two mini-steps of the first update: TF's global step is 0 for both
        u, state = multi.update(jnp.ones(1), state, params, global_step=0)
    bare = gradtx.adam_gs(0.1)
    v, _ = bare.update(jnp.ones(1), bare.init(params), params, global_step=0)
    np.testing.assert_allclose(u, v, rtol=1e-6)
