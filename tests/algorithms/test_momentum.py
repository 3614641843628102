"""gradtx/_algorithms/momentum.py: `trace` is TF's ApplyMomentum accumulator; the aliases `momentum` (TF's
MomentumOptimizer, plain and Nesterov) and `momentumw` (contrib's MomentumWOptimizer) against float64
references of their rules.

Here: the accumulator bit for bit, its schedule and slot; the aliases' numbers against tests/reference.py
and tests/reference_contrib.py in float32 and float64, dense and row-sparse, `mu_dtype`, and the errors.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers, reference
from tests import reference_contrib as ref


@pytest.mark.parametrize("nesterov", [False, True])
def test_trace_follows_the_tf_kernel_bit_for_bit(nesterov):
    """The float32 arithmetic of ApplyMomentum, replayed in NumPy float32: identical bits."""
    mu = np.float32(0.8)
    tx = gradtx.trace(0.8, nesterov=nesterov)
    state = tx.init(jnp.zeros(3))
    rng = np.random.default_rng(0)
    accum = np.zeros(3, np.float32)
    for _ in range(5):
        g = rng.standard_normal(3).astype(np.float32)
        u, state = tx.update(jnp.asarray(g), state)
        accum = accum * mu + g
        np.testing.assert_array_equal(u, g + accum * mu if nesterov else accum)
        np.testing.assert_array_equal(state.momentum, accum)
    assert int(state.count) == 5


def test_trace_with_a_momentum_schedule():
    tx = gradtx.trace(lambda count: jnp.where(count < 1, 0.0, 0.5))
    state = tx.init(jnp.zeros(1))
    u1, state = tx.update(jnp.ones(1), state)
    u2, state = tx.update(jnp.ones(1), state)
    assert float(u1[0]) == 1.0 and float(u2[0]) == 1.5


def test_trace_slot_starts_at_zero_and_is_named_like_tf():
    state = gradtx.trace(0.9).init({"w": jnp.ones((2, 2))})
    assert state._fields == ("count", "momentum")
    np.testing.assert_array_equal(state.momentum["w"], np.zeros((2, 2)))


# --------------------------------------------------------------------------- the aliases against TF's rules

# name -> (gradtx transform, float64 reference, slot names)
TF_CASES = {
    "momentum": (lambda: gradtx.momentum(0.05, 0.9), lambda: reference.momentum(0.05, 0.9), ["momentum"]),
    "nesterov": (
        lambda: gradtx.momentum(0.05, 0.9, nesterov=True),
        lambda: reference.momentum(0.05, 0.9, True),
        ["momentum"],
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


def _check(name, sparse, *, x64):
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
    _check(name, sparse, x64=False)


@SPARSE
@pytest.mark.parametrize("name", list(TF_CASES))
def test_float64_matches_the_reference_formula_exactly(name, sparse):
    _check(name, sparse, x64=True)


CONTRIB_CASES = {
    "momentumw": (lambda: gradtx.momentumw(0.05, 0.9, 0.1), lambda: ref.momentumw(0.05, 0.9, 0.1), [], None),
    "momentumw-nesterov": (
        lambda: gradtx.momentumw(0.05, 0.9, 0.1, nesterov=True),
        lambda: ref.momentumw(0.05, 0.9, 0.1, nesterov=True),
        [],
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


def test_momentum_mu_dtype_keeps_accumulator_in_float32():
    tx = gradtx.momentum(0.1, 0.9, mu_dtype=jnp.float32)
    params = jnp.ones(3, jnp.bfloat16)
    state = tx.init(params)
    assert gradtx.get_slot(state, "momentum").dtype == jnp.float32
    updates, state = tx.update(jnp.ones(3, jnp.bfloat16), state, params)
    assert updates.dtype == jnp.bfloat16 and gradtx.get_slot(state, "momentum").dtype == jnp.float32


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.momentum,
            {"learning_rate": -0.1, "momentum": 0.9},
            r"`momentum`: `learning_rate` must be >= 0, got -0.1",
        ),
        (
            gradtx.momentum,
            {"learning_rate": float("nan"), "momentum": 0.9},
            r"`learning_rate` must be finite, got nan",
        ),
        (
            gradtx.momentum,
            {"learning_rate": 0.1, "momentum": -0.5},
            r"`momentum`: `momentum` must be in \[0.0, 1.0\]",
        ),
        (
            gradtx.momentum,
            {"learning_rate": 0.1, "momentum": 1.5},
            r"`momentum` must be in \[0.0, 1.0\], got 1.5",
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
            gradtx.momentum,
            {"learning_rate": "0.1", "momentum": 0.9},
            r"`momentum`: `learning_rate` must be a number",
        ),
        (
            gradtx.momentum,
            {"learning_rate": 0.1, "momentum": True},
            r"`momentum` must be a number.*got True of type bool",
        ),
        (
            gradtx.momentum,
            {"learning_rate": 0.1, "momentum": 0.9, "nesterov": 1},
            r"`nesterov` must be True or False",
        ),
        (
            gradtx.momentum,
            {"learning_rate": jnp.ones(2), "momentum": 0.9},
            r"`learning_rate` must be a scalar",
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
            gradtx.momentumw,
            {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": -1.0},
            r"`momentumw`: `weight_decay` must be >= 0",
        ),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
