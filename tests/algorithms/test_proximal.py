"""gradtx/_algorithms/proximal.py: scale_by_proximal_sgd and scale_by_proximal_adagrad (FOBOS, TF's
ApplyProximalGradientDescent and ApplyProximalAdagrad) as building blocks, and the aliases against float64
references of TF's rules.

The aliases are compared with TF in tests/parity/test_proximal.py. Here: the blocks' numbers in float64 (a
row-sparse and a dense leaf in one tree) with schedules, including an `l1` that switches the kernel's `l1 > 0`
branch at run time, the exact zeros of the soft threshold, the state, and the errors; the aliases' numbers
against tests/reference.py in float32 (TF's tolerance) and float64 (1e-10), dense and row-sparse, an `l1`
schedule giving NaN, and their errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import (
    ScaleByProximalAdagradState,
    ScaleByProximalSGDState,
    scale_by_proximal_adagrad,
    scale_by_proximal_sgd,
)
from tests import helpers, reference

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def _check(block, ref, slots=()):
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


def test_proximal_sgd_matches_the_float64_reference_dense_and_row_sparse():
    """`l1` alternates 0.3 and 0 (both branches of the kernel); sparse: the touched rows only."""

    def ref_step(var, g, s, t):
        return reference.proximal_sgd(0.2, 0.3 * (t % 2), 0.5).step(var, g, s, t)

    block = scale_by_proximal_sgd(0.2, l1=lambda count: 0.3 * ((count + 1) % 2), l2=0.5)
    _check(block, reference.Reference(reference.proximal_sgd(0.2).init, ref_step))


def test_proximal_adagrad_matches_the_float64_reference_dense_and_row_sparse():
    """A learning-rate schedule lr_t = 0.3 / t, l1 = 0.1, l2 = 0.2; sparse: the touched rows only."""

    def ref_step(var, g, s, t):
        return reference.proximal_adagrad(0.3 / t, 0.2, 0.1, 0.2).step(var, g, s, t)

    block = scale_by_proximal_adagrad(lambda count: 0.3 / (count + 1), 0.2, l1=0.1, l2=0.2)
    _check(block, reference.Reference(reference.proximal_adagrad(0.3, 0.2).init, ref_step), ["accumulator"])


def test_soft_threshold_gives_exact_zeros():
    """prox = var - lr g; |prox| <= lr l1 gives 0, else sign(prox) (|prox| - lr l1) / (1 + l2 lr)."""
    lr, l1, l2 = 0.5, 0.4, 0.2  # threshold lr * l1 = 0.2
    var, g = jnp.array([0.1, -0.2, -0.3, 1.0, 0.6]), jnp.array([0.0, 0.0, 0.0, 0.0, 1.0])
    tx = scale_by_proximal_sgd(lr, l1=l1, l2=l2)
    u, _ = jax.jit(tx.update)(g, tx.init(var), var)
    new = np.asarray(var - u)
    np.testing.assert_allclose(new, [0.0, 0.0, -0.1 / 1.1, 0.8 / 1.1, 0.0], rtol=1e-6, atol=1e-7)
    assert new[0] == new[1] == new[4] == 0.0


def test_proximal_sgd_without_regularization_is_sgd():
    params, grads = helpers.problem(4, shapes=[(3, 2)], steps=3)
    plain, _ = helpers.run(
        gradtx.chain(scale_by_proximal_sgd(0.1), gradtx.scale_by_learning_rate(1.0)), params, grads
    )
    sgd, _ = helpers.run(gradtx.sgd(0.1), params, grads)
    helpers.assert_trees_close(plain, sgd, rtol=1e-6, atol=1e-7)


def test_state_and_initial_values():
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = scale_by_proximal_sgd(0.1).init(params)
    assert type(state) is ScaleByProximalSGDState and state._fields == ("count",)
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    state = scale_by_proximal_adagrad(0.1, 0.3).init(params)
    assert type(state) is ScaleByProximalAdagradState and state._fields == ("count", "accumulator")
    helpers.assert_trees_close(state.accumulator, jax.tree.map(lambda p: np.full_like(p, 0.3), params))
    assert scale_by_proximal_adagrad(0.1).init(jnp.zeros(1)).accumulator[0] == np.float32(0.1)  # TF's


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            scale_by_proximal_sgd,
            {"learning_rate": -0.1},
            r"`scale_by_proximal_sgd`: `learning_rate` must be >= 0",
        ),
        (scale_by_proximal_sgd, {"l1": -1.0}, r"`scale_by_proximal_sgd`: `l1` must be >= 0, got -1.0\."),
        (scale_by_proximal_sgd, {"l2": -1.0}, r"`scale_by_proximal_sgd`: `l2` must be >= 0, got -1.0\."),
        (
            scale_by_proximal_sgd,
            {"l1": float("inf")},
            r"`scale_by_proximal_sgd`: `l1` must be finite, got inf\.",
        ),
        (
            scale_by_proximal_adagrad,
            {"initial_accumulator_value": 0.0},
            r"`scale_by_proximal_adagrad`: `initial_accumulator_value` must be > 0, got 0.0\.",
        ),
        (
            scale_by_proximal_adagrad,
            {"l1": -1.0},
            r"`scale_by_proximal_adagrad`: `l1` must be >= 0, got -1.0\.",
        ),
        (
            scale_by_proximal_adagrad,
            {"learning_rate": float("nan")},
            r"`scale_by_proximal_adagrad`: `learning_rate` must be finite, got nan\.",
        ),
        (
            scale_by_proximal_adagrad,
            {"l2": float("inf")},
            r"`scale_by_proximal_adagrad`: `l2` must be finite, got inf\.",
        ),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})


def test_bad_types():
    with pytest.raises(
        TypeError,
        match=r"`scale_by_proximal_adagrad`: `initial_accumulator_value` must be a number or a scalar",
    ):
        scale_by_proximal_adagrad(0.1, initial_accumulator_value=lambda count: 0.1)
    with pytest.raises(TypeError, match=r"`scale_by_proximal_sgd`: `l1` must be a number, a scalar array or"):
        scale_by_proximal_sgd(0.1, l1="0.1")


# --------------------------------------------------------------------------- the aliases against TF's rules

# name -> (gradtx transform, float64 reference, slot names)
TF_CASES = {
    "proximal_sgd": (
        lambda: gradtx.proximal_sgd(0.1, l1=0.05, l2=0.5),
        lambda: reference.proximal_sgd(0.1, 0.05, 0.5),
        [],
    ),
    "proximal_adagrad": (
        lambda: gradtx.proximal_adagrad(0.2, 0.1, l1=0.05, l2=0.5),
        lambda: reference.proximal_adagrad(0.2, 0.1, 0.05, 0.5),
        ["accumulator"],
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
@pytest.mark.parametrize(
    "make",
    [
        lambda l1: gradtx.proximal_sgd(0.1, l1=l1),
        lambda l1: gradtx.proximal_adagrad(0.1, l1=l1),
    ],
    ids=["proximal_sgd", "proximal_adagrad"],
)
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
            gradtx.proximal_adagrad,
            {"learning_rate": 0.1, "initial_accumulator_value": 0.0},
            r"`proximal_adagrad`: `initial_accumulator_value` must be > 0",
        ),
        (
            gradtx.proximal_adagrad,
            {"learning_rate": 0.1, "l1": -1.0},
            r"`proximal_adagrad`: `l1` must be >= 0",
        ),
        (gradtx.proximal_sgd, {"learning_rate": 0.1, "l2": -1.0}, r"`proximal_sgd`: `l2` must be >= 0"),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
