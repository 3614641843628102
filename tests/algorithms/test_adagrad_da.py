"""gradtx/_algorithms/adagrad_da.py: scale_by_adagrad_da (TF's ApplyAdagradDA) as a building block, and the
alias `adagrad_da` against the float64 reference of TF's rule.

The alias is compared with TF in tests/parity/test_adagrad.py. Here: the block's numbers in float64 (a
row-sparse and a dense leaf in one tree), its closed form at step t, and its errors (its slots are checked
with Adagrad's in test_adagrad.py); the alias's numbers against tests/reference.py in float32 (TF's
tolerance) and float64 (1e-10), dense and row-sparse, an `l1` schedule giving NaN, and its errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import ScaleByAdagradDAState, scale_by_adagrad_da
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


def test_adagrad_da_matches_the_float64_reference_dense_and_row_sparse():
    """The closed form with t = count + 1; `l1` a schedule that switches the kernel's `l1 > 0` branch on and
    off (0, 0.05, 0, 0.05), so both branches are checked."""
    lr, l2 = 0.2, 0.3

    def ref_step(var, g, s, t):
        return reference.adagrad_da(lr, 0.4, 0.05 * ((t - 1) % 2), l2).step(var, g, s, t)

    ref = reference.Reference(reference.adagrad_da(lr, 0.4).init, ref_step)
    block = scale_by_adagrad_da(lr, 0.4, l1=lambda count: 0.05 * (count % 2), l2=l2)
    _check(block, ref, ["gradient_accumulator", "gradient_squared_accumulator"])


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


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
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


# --------------------------------------------------------------------------- the alias against TF's rule

# name -> (gradtx transform, float64 reference, slot names)
TF_CASES = {
    "adagrad_da": (
        lambda: gradtx.adagrad_da(0.2, 0.1, l1=0.05, l2=0.3),
        lambda: reference.adagrad_da(0.2, 0.1, 0.05, 0.3),
        ["gradient_accumulator", "gradient_squared_accumulator"],
    ),
    "adagrad_da-no-l1": (
        lambda: gradtx.adagrad_da(0.2, 0.5, l2=0.3),
        lambda: reference.adagrad_da(0.2, 0.5, 0.0, 0.3),
        ["gradient_accumulator"],
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


def _check_alias(name, sparse, *, x64):
    make_tx, make_ref, slots = TF_CASES[name]
    helpers.compare_to_reference(
        make_tx,
        make_ref,
        sparse=sparse,
        x64=x64,
        slots=slots,
        atol32=5e-6 if name.startswith("adam") else 1e-6,
    )


@SPARSE
@pytest.mark.parametrize("name", list(TF_CASES))
def test_float32_matches_the_float64_reference(name, sparse):
    _check_alias(name, sparse, x64=False)


@SPARSE
@pytest.mark.parametrize("name", list(TF_CASES))
def test_float64_matches_the_reference_formula_exactly(name, sparse):
    _check_alias(name, sparse, x64=True)


@pytest.mark.parametrize("bad_l1", [float("nan"), -1.0], ids=["nan", "negative"])
@pytest.mark.parametrize("make", [lambda l1: gradtx.adagrad_da(0.1, l1=l1)], ids=["adagrad_da"])
def test_a_schedule_giving_a_nan_or_negative_l1_makes_the_step_nan(make, bad_l1):
    """TF's kernels test `l1 > 0` and step as if it were 0; a schedule's NaN is not swallowed here."""
    tx = make(lambda count: jnp.asarray(bad_l1))
    params = jnp.ones(2)
    updates, _ = jax.jit(tx.update)(jnp.ones(2), tx.init(params), params)
    assert bool(jnp.all(jnp.isnan(updates)))
    zero = make(lambda count: jnp.asarray(0.0))  # and l1 == 0 is still the plain step
    assert bool(jnp.all(jnp.isfinite(zero.update(jnp.ones(2), zero.init(params), params)[0])))


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.adagrad_da,
            {"learning_rate": 0.1, "initial_gradient_squared_accumulator_value": -1.0},
            r"`adagrad_da`: `initial_gradient_squared_accumulator_value` must be > 0",
        ),
        (gradtx.adagrad_da, {"learning_rate": 0.1, "l1": -0.1}, r"`adagrad_da`: `l1` must be >= 0, got -0.1"),
        (gradtx.adagrad_da, {"learning_rate": 0.1, "l2": -0.1}, r"`adagrad_da`: `l2` must be >= 0, got -0.1"),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
