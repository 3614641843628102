"""gradtx/_algorithms/adagrad.py: scale_by_adagrad (TF's ApplyAdagrad) as a building block, and the aliases
`adagrad` and `reg_adagrad` against float64 references of TF's rules.

The aliases are compared with TF in tests/parity/test_adagrad.py. Here: the block's numbers in float64 (a
row-sparse and a dense leaf in one tree), its slots (and AdagradDA's, gradtx/_algorithms/adagrad_da.py:
test_adagrad_da.py), a traced `update_slots` and the errors; the aliases' numbers against
tests/reference.py in float32 (TF's tolerance) and float64 (1e-10), dense and row-sparse, RegAdagrad's
`update_slots=False`, TF's slot initial values, and the aliases' errors.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
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


# --------------------------------------------------------------------------- the aliases against TF's rules

# name -> (gradtx transform, float64 reference, slot names)
TF_CASES = {
    "adagrad": (lambda: gradtx.adagrad(0.1, 0.3), lambda: reference.adagrad(0.1, 0.3), ["accumulator"]),
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


CONTRIB_CASES = {
    "reg_adagrad": (
        lambda: gradtx.reg_adagrad(0.1, 0.3),
        lambda: reference.adagrad(0.1, 0.3),
        ["accumulator"],
        None,
    ),
}


@SPARSE
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CONTRIB_CASES))
def test_matches_the_reference(name, sparse, x64):
    make_tx, make_ref, slots, extra = CONTRIB_CASES[name]
    helpers.compare_to_reference(
        make_tx, make_ref, sparse=sparse, x64=x64, slots=slots, extra_args=extra, atol32=5e-6
    )


def test_reg_adagrad_can_skip_the_slot_update():
    tx = gradtx.reg_adagrad(1.0, initial_accumulator_value=4.0)
    state = tx.init(jnp.zeros(2))
    u, state = jax.jit(lambda g, s: tx.update(g, s, update_slots=False))(jnp.ones(2), state)
    np.testing.assert_array_equal(u, [-0.5, -0.5])
    np.testing.assert_array_equal(gradtx.get_slot(state, "accumulator"), [4.0, 4.0])
    u, state = tx.update(jnp.ones(2), state)
    np.testing.assert_allclose(u, -1 / np.sqrt(5.0) * np.ones(2), rtol=1e-6)
    u, state = tx.update(RowSparse(jnp.array([1]), jnp.ones((1,)), (2,)), state, update_slots=False)
    np.testing.assert_array_equal(gradtx.get_slot(state, "accumulator"), [5.0, 5.0])


def test_slot_initial_values_are_tfs():
    params = {"w": jnp.zeros((2, 3))}

    def slot(tx, name):
        return float(gradtx.get_slot(tx.init(params), name, "w")[0, 0])

    assert slot(gradtx.adagrad(0.1), "accumulator") == np.float32(0.1)
    assert slot(gradtx.rmsprop(0.1), "rms") == 1.0
    assert slot(gradtx.rmsprop(0.1), "momentum") == 0.0
    assert gradtx.slot_names(gradtx.rmsprop(0.1).init(params)) == [
        "momentum",
        "rms",
    ]  # no "mg" unless centered
    assert slot(gradtx.ftrl(0.1), "accum") == np.float32(0.1)
    assert slot(gradtx.adagrad_da(0.1), "gradient_squared_accumulator") == np.float32(0.1)
    a = gradtx.adam().init(params)[0]
    assert float(a.beta1_power) == np.float32(0.9) and float(a.beta2_power) == np.float32(0.999)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.adagrad,
            {"learning_rate": 0.1, "initial_accumulator_value": 0.0},
            r"`adagrad`: `initial_accumulator_value` must be > 0, got 0.0",
        ),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.adagrad,
            {"learning_rate": 0.1, "initial_accumulator_value": lambda c: 0.1},
            r"`adagrad`: `initial_accumulator_value` must be a number or a scalar array \(not a schedule",
        ),
    ],
)
def test_bad_types_raise_type_error(factory, kwargs, match):
    with pytest.raises(TypeError, match=match):
        factory(**kwargs)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.reg_adagrad,
            {"learning_rate": 0.1, "initial_accumulator_value": 0.0},
            r"`reg_adagrad`: `initial_accumulator_value` must be > 0",
        ),
    ],
)
def test_alias_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
