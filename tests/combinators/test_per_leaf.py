"""gradtx/combinators/_per_leaf.py: per_leaf, an optimizer written as one rule for one array (RETURNN's
BaseCustomOptimizer).

Here: a rule that reads its parameter, its slots and schedules, in float64 against a reference (a
row-sparse gradient is densified first: the registry's "dense" rule), the `count` the rule receives, the
state, and the errors; RETURNN's CustomAdamOptimizer and CustomGradientDescentOptimizer written with it,
against float64 references of RETURNN's rules.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import PerLeafState, per_leaf
from tests import helpers, reference
from tests import reference_contrib as ref

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def _momentum_w(learning_rate, momentum, weight_decay):
    """TF's momentum kernel plus a decay of the weights (MomentumW) as one per-array rule."""

    def apply(g, p, slots, count, learning_rate, momentum, weight_decay):
        accum = slots["momentum"] * momentum + g
        return weight_decay * p + learning_rate * accum, {"momentum": accum}

    return per_leaf(
        lambda p: {"momentum": jnp.zeros_like(p)},
        apply,
        learning_rate=learning_rate,
        momentum=momentum,
        weight_decay=weight_decay,
    )


def test_a_rule_with_param_slot_and_schedule_matches_the_float64_reference():
    """var -= wd * var + lr_t * accum, with lr_t = 0.1 / (1 + count): dense leaves, and row-sparse ones
    densified (untouched rows decay their weights and keep stepping with their momentum)."""

    def ref_step(var, g, s, t):
        return ref.momentumw(0.1 / t, 0.9, 0.05).step(var, g, s, t)

    def ref_sparse(var, indices, values, s, t):
        g = np.zeros_like(var)
        np.add.at(g, np.asarray(indices), np.asarray(values, np.float64))
        return ref_step(var, g, s, t)

    params, grads = _problem()
    expected, ref_slots = reference.run(
        reference.Reference(reference.momentum(0.1, 0.9).init, ref_step, ref_sparse), params, grads
    )
    with jax.enable_x64(True):
        tx = _momentum_w(lambda count: 0.1 / (1 + count), 0.9, 0.05)
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    helpers.assert_trees_close(
        gradtx.get_slot(state, "momentum"), [s["momentum"] for s in ref_slots], rtol=1e-10, atol=1e-10
    )
    assert int(state[0].count) == len(grads)


def test_the_rule_receives_count_and_resolved_hyperparameters():
    """Step t calls `apply` with count = t - 1 (an int32 array) and each schedule's value at that count."""

    def apply(g, p, slots, count, scale):
        assert count.dtype == jnp.int32 and count.shape == ()
        return g * (count + 1).astype(g.dtype) * scale, slots

    tx = per_leaf(lambda p: {}, apply, scale=lambda count: 10.0**count)
    params = {"a": jnp.zeros(2), "b": [jnp.zeros(())]}
    state, steps = tx.init(params), []
    update = jax.jit(tx.update)
    for _ in range(3):
        u, state = update(jax.tree.map(jnp.ones_like, params), state, params)
        steps.append(u)
    for t, u in enumerate(steps, start=1):  # the step is subtracted: update = -(t * 10^(t-1))
        expected = -t * 10.0 ** (t - 1)
        helpers.assert_trees_close(u, {"a": np.full(2, expected), "b": [np.float32(expected)]}, rtol=1e-6)
    assert int(state[0].count) == 3


def test_state_holds_the_named_slots_as_init_slots_made_them():
    def init_slots(p):
        return {"v": jnp.full_like(p, 0.5), "m": jnp.zeros_like(p)}

    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = per_leaf(init_slots, lambda g, p, s, count: (g, s)).init(params)
    rule_state = state[0]
    assert type(rule_state) is PerLeafState and rule_state._fields == ("count", "slots")
    assert list(rule_state.slots) == ["m", "v"]  # sorted
    assert rule_state.count.dtype == jnp.int32 and int(rule_state.count) == 0
    helpers.assert_trees_close(rule_state.slots["v"], jax.tree.map(lambda p: np.full_like(p, 0.5), params))
    assert gradtx.slot_names(state) == ["m", "v"]
    np.testing.assert_array_equal(gradtx.get_slot(state, "m", "w"), np.zeros((2, 3)))


def test_errors():
    with pytest.raises(TypeError, match=r"`per_leaf`: `init_slots` must be callable, got 3 of type int"):
        per_leaf(3, lambda g, p, s, count: (g, s))
    with pytest.raises(TypeError, match=r"`per_leaf`: `decay` must be a number, .*got True of type bool"):
        per_leaf(lambda p: {}, lambda g, p, s, count, decay: (g, s), decay=True)
    tx = per_leaf(lambda p: {}, lambda g, p, s, count: (g, s))
    with pytest.raises(ValueError, match=r"`per_leaf`: `update` needs the current parameters"):
        tx.update(jnp.ones(2), tx.init(jnp.ones(2)))
    extra = per_leaf(lambda p: {"m": p}, lambda g, p, s, count: (g, {"m": g, "v": g}))
    with pytest.raises(
        ValueError, match=r"`per_leaf`: `apply` must return the slots \['m'\], got \['m', 'v'\]"
    ):
        extra.update(jnp.ones(2), extra.init(jnp.ones(2)), jnp.ones(2))


# --------------------------------------------------------------------------- RETURNN's custom optimizers


def _custom_adam(learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8):
    """RETURNN's CustomAdamOptimizer written with per_leaf, exactly as per_leaf's docstring shows it."""

    def init(p):
        return {"m": jnp.zeros_like(p), "v": jnp.zeros_like(p)}

    def apply(g, p, s, count, learning_rate, beta1, beta2, epsilon):
        t = (count + 1).astype(g.dtype)
        lr = learning_rate * jnp.sqrt(1 - beta2**t) / (1 - beta1**t)
        m = beta1 * s["m"] + (1 - beta1) * g
        v = beta2 * s["v"] + (1 - beta2) * (g * g)
        return lr * (m / (jnp.sqrt(v) + epsilon)), {"m": m, "v": v}

    return gradtx.per_leaf(
        init, apply, learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon
    )


@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
def test_per_leaf_custom_adam_is_returnns_custom_adam(x64):
    helpers.compare_to_reference(
        lambda: _custom_adam(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.custom_adam(0.05, 0.8, 0.95, 1e-3),
        sparse=False,
        x64=x64,
    )


def test_per_leaf_custom_sgd_is_sgd_and_densifies_sparse_gradients():
    custom = gradtx.per_leaf(
        lambda p: {},
        lambda g, p, s, count, learning_rate: (learning_rate * g, s),
        learning_rate=lambda count: 0.1,
    )
    params, grads = helpers.problem(0, sparse=True)
    a, _ = helpers.run(custom, params, helpers.to_gradtx(grads))
    b, _ = helpers.run(gradtx.sgd(0.1), params, helpers.to_gradtx(grads))
    helpers.assert_trees_close(a, b, rtol=1e-6, atol=1e-7)


def test_per_leaf_slots_are_visible_by_name():
    state = _custom_adam(0.1).init({"w": jnp.zeros(3)})
    assert gradtx.slot_names(state) == ["m", "v"]
    np.testing.assert_array_equal(gradtx.get_slot(state, "m", "w"), np.zeros(3))


def test_per_leaf_errors():
    with pytest.raises(TypeError, match=r"`per_leaf`: `apply` must be callable"):
        gradtx.per_leaf(lambda p: {}, None)
    with pytest.raises(TypeError, match=r"`per_leaf`: `learning_rate` must be a number"):
        gradtx.per_leaf(lambda p: {}, lambda *a: a, learning_rate="fast")
    bad = gradtx.per_leaf(lambda p: {"m": p}, lambda g, p, s, c: (g, {}))
    with pytest.raises(ValueError, match=r"`per_leaf`: `apply` must return the slots \['m'\], got \[\]"):
        bad.update(jnp.ones(2), bad.init(jnp.ones(2)), jnp.ones(2))
