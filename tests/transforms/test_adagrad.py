"""gradtx/transforms/_adagrad.py: scale_by_adagrad (ApplyAdagrad) and scale_by_adagrad_da (ApplyAdagradDA).

The aliases `adagrad`, `reg_adagrad` and `adagrad_da` are compared with TF in tests/parity/test_adagrad.py
and at float32 precision in tests/optimizers/. Here: the blocks' numbers in float64 (a row-sparse and
a dense leaf in one tree), their slots, AdagradDA's closed form at step t, a traced `update_slots`,
and the errors.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import (
    ScaleByAdagradDAState,
    ScaleByAdagradState,
    scale_by_adagrad,
    scale_by_adagrad_da,
)
from tests import helpers, reference

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def _check(block, ref, slots):
    """Float64: `chain(block, scale_by_learning_rate(1.0))` against `ref`, params after each step, slots."""
    params, grads = _problem()
    expected, ref_slots = reference.run(ref, params, grads)
    with jax.enable_x64(True):
        tx = gradtx.chain(block, gradtx.scale_by_learning_rate(1.0))
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    for slot in slots:
        helpers.assert_trees_close(
            gradtx.get_slot(state, slot), [s[slot] for s in ref_slots], rtol=1e-10, atol=1e-10, msg=slot
        )
    assert int(state[0].count) == len(grads)


def test_adagrad_matches_the_float64_reference_dense_and_row_sparse():
    """ApplyAdagrad with lr = 1 (the block's update is g / sqrt(accum)); sparse: touched rows only."""
    _check(scale_by_adagrad(0.5), reference.adagrad(1.0, 0.5), ["accumulator"])


def test_adagrad_da_matches_the_float64_reference_dense_and_row_sparse():
    """The closed form with t = count + 1; `l1` a schedule that switches the kernel's `l1 > 0` branch on and
    off (0, 0.05, 0, 0.05), so both branches are checked."""
    lr, l2 = 0.2, 0.3

    def ref_step(var, g, s, t):
        return reference.adagrad_da(lr, 0.4, 0.05 * ((t - 1) % 2), l2).step(var, g, s, t)

    ref = reference.Reference(reference.adagrad_da(lr, 0.4).init, ref_step)
    block = scale_by_adagrad_da(lr, 0.4, l1=lambda count: 0.05 * (count % 2), l2=l2)
    _check(block, ref, ["gradient_accumulator", "gradient_squared_accumulator"])


def test_state_has_tfs_slot_names_and_initial_values():
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = scale_by_adagrad(0.25).init(params)
    assert type(state) is ScaleByAdagradState and state._fields == ("count", "accumulator")
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    helpers.assert_trees_close(state.accumulator, jax.tree.map(lambda p: np.full_like(p, 0.25), params))
    state = scale_by_adagrad_da(0.1, 0.3).init(params)
    assert type(state) is ScaleByAdagradDAState
    assert state._fields == ("count", "gradient_accumulator", "gradient_squared_accumulator")
    helpers.assert_trees_close(state.gradient_accumulator, jax.tree.map(np.zeros_like, params), atol=0)
    helpers.assert_trees_close(
        state.gradient_squared_accumulator, jax.tree.map(lambda p: np.full_like(p, 0.3), params)
    )
    assert scale_by_adagrad().init(jnp.zeros(1)).accumulator[0] == np.float32(0.1)  # TF's default


def test_adagrad_da_closed_form_at_step_t_ignores_the_old_weights():
    """At count 9 (t = 10), with l1 = 0.05 the threshold is t * l1 = 0.5: |G| <= 0.5 gives exactly 0."""
    lr, l1, l2, t = 0.5, 0.05, 0.2, 10
    g_acc = np.array([0.3, -0.35, 0.9, -1.6])
    gg_acc = np.array([0.5, 0.7, 1.1, 2.0])
    g = np.array([0.1, 0.1, 0.2, -0.4])
    tx = scale_by_adagrad_da(lr, l1=l1, l2=l2)
    state = ScaleByAdagradDAState(
        jnp.int32(t - 1), jnp.asarray(g_acc, jnp.float32), jnp.asarray(gg_acc, jnp.float32)
    )
    G, S = g_acc + g, gg_acc + g * g  # |G| = [0.4, 0.25, 1.1, 2.0]
    expected = -lr * np.sign(G) * np.maximum(np.abs(G) - t * l1, 0) / (l2 * t * lr + np.sqrt(S))
    assert expected[0] == expected[1] == 0.0 and np.all(expected[2:] != 0)
    update = jax.jit(tx.update)
    for var in (np.zeros(4), np.array([3.0, -2.0, 1.0, 7.0])):
        var = jnp.asarray(var, jnp.float32)
        u, new_state = update(jnp.asarray(g, jnp.float32), state, var)
        np.testing.assert_allclose(var - u, expected, rtol=1e-6, atol=1e-7)  # the block outputs var - new
    assert int(new_state.count) == t
    np.testing.assert_allclose(new_state.gradient_accumulator, G, rtol=1e-6)


def test_adagrad_update_slots_may_be_a_traced_flag():
    """`update_slots=False` (RegAdagrad's avoid_updating_slots) steps with the old accumulator and keeps it;
    a traced flag picks either rule at run time, with one compilation."""
    tx = scale_by_adagrad(4.0)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(g, state, flag):
        return tx.update(g, state, update_slots=flag)

    g = jnp.array([3.0, 0.0])
    u, state = step(g, tx.init(jnp.zeros(2)), jnp.bool_(False))
    np.testing.assert_array_equal(u, [1.5, 0.0])
    np.testing.assert_array_equal(state.accumulator, [4.0, 4.0])
    u, state = step(g, state, jnp.bool_(True))
    np.testing.assert_allclose(u, [3.0 / np.sqrt(13.0), 0.0], rtol=1e-6)
    np.testing.assert_array_equal(state.accumulator, [13.0, 4.0])
    assert int(state.count) == 2


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            scale_by_adagrad,
            {"initial_accumulator_value": 0.0},
            r"`scale_by_adagrad`: `initial_accumulator_value` must be > 0, got 0.0\.",
        ),
        (
            scale_by_adagrad,
            {"initial_accumulator_value": float("nan")},
            r"`scale_by_adagrad`: `initial_accumulator_value` must be finite, got nan\.",
        ),
        (
            scale_by_adagrad,
            {"initial_accumulator_value": float("inf")},
            r"`scale_by_adagrad`: `initial_accumulator_value` must be finite, got inf\.",
        ),
        (
            scale_by_adagrad_da,
            {"learning_rate": -0.1},
            r"`scale_by_adagrad_da`: `learning_rate` must be >= 0, got -0.1\.",
        ),
        (
            scale_by_adagrad_da,
            {"learning_rate": 0.1, "initial_gradient_squared_accumulator_value": 0.0},
            r"`scale_by_adagrad_da`: `initial_gradient_squared_accumulator_value` must be > 0, got 0.0\.",
        ),
        (
            scale_by_adagrad_da,
            {"learning_rate": 0.1, "l1": -0.1},
            r"`scale_by_adagrad_da`: `l1` must be >= 0, got -0.1\.",
        ),
        (
            scale_by_adagrad_da,
            {"learning_rate": 0.1, "l2": -0.1},
            r"`scale_by_adagrad_da`: `l2` must be >= 0, got -0.1\.",
        ),
        (
            scale_by_adagrad_da,
            {"learning_rate": 0.1, "l1": float("inf")},
            r"`scale_by_adagrad_da`: `l1` must be finite, got inf\.",
        ),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


def test_bad_types():
    with pytest.raises(
        TypeError,
        match=r"`scale_by_adagrad`: `initial_accumulator_value` must be a number or a scalar array \(",
    ):
        scale_by_adagrad(lambda count: 0.1)
    with pytest.raises(TypeError, match=r"`scale_by_adagrad_da`: `l2` must be a number, a scalar array or"):
        scale_by_adagrad_da(0.1, l2="0.1")
