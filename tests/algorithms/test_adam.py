"""gradtx/_algorithms/adam.py: TF1's Adam as a building block per variant of the family (Adam, NAdam,
LazyAdam, AdamGS, AdaMax: TF's scalar dtypes, slots kept), and the alias `adam` against the float64
reference of TF's rule.

The numbers of the other variants are checked in their own files (test_nadam.py, test_lazy_adam.py,
test_adam_gs.py, test_adamax.py; against TF itself in tests/parity/test_adam.py). Here: TF's beta powers in
the variables' dtype, bfloat16 params, the variants against each other, the alias's numbers against
tests/reference.py in float32 (TF's tolerance) and float64 (1e-10), dense and row-sparse, `mu_dtype`, and
the errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers, reference

VARIANTS = {
    "scale_by_adam": gradtx.scale_by_adam,
    "scale_by_nesterov_adam": gradtx.scale_by_nesterov_adam,
    "scale_by_lazy_adam": gradtx.scale_by_lazy_adam,
    "scale_by_adam_gs": gradtx.scale_by_adam_gs,
    "scale_by_lazy_adam_gs": gradtx.scale_by_lazy_adam_gs,
    "scale_by_adamax": gradtx.scale_by_adamax,
}
EXTRA = [{"global_step": t} for t in range(19)]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_x64_does_not_change_the_numbers_of_float32_params(name):
    """TF keeps beta powers in the variables' dtype: float32 params, float32 scalars, x64 or not."""
    tx = gradtx.chain(VARIANTS[name](0.9, 0.999, 1e-3), gradtx.scale_by_learning_rate(0.05))
    params, grads = helpers.problem(2, steps=19)
    plain, plain_state = helpers.run(tx, params, grads, extra_args_seq=EXTRA)
    with jax.enable_x64(True):
        wide, wide_state = helpers.run(tx, params, grads, extra_args_seq=EXTRA)
        assert wide_state[0].beta1_power.dtype == jnp.float32
    helpers.assert_trees_close(wide, plain, rtol=0, atol=0)
    helpers.assert_trees_close(wide_state, plain_state, rtol=0, atol=0)


def test_float64_params_get_float64_beta_powers():
    with jax.enable_x64(True):
        state = gradtx.scale_by_adam().init(jnp.zeros(2, jnp.float64))
        assert state.beta1_power.dtype == state.beta2_power.dtype == jnp.float64


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_bfloat16_params_with_float32_gradients_keep_their_slot_dtypes(name, sparse):
    tx = VARIANTS[name](mu_dtype=jnp.bfloat16) if name != "scale_by_adamax" else VARIANTS[name]()
    params = jnp.zeros((4, 2), jnp.bfloat16)
    grad = jnp.full((4, 2), 0.3, jnp.float32)
    if sparse:
        grad = RowSparse(jnp.array([1, 3]), grad[:2], (4, 2))
    state = tx.init(params)
    _, new_state = tx.update(grad, state, params, global_step=0)
    assert helpers.shape_dtypes(new_state) == helpers.shape_dtypes(state)


def test_the_variants_differ_only_where_their_rules_do():
    """Dense gradients: lazy == TF1 Adam, AdamGS (global_step = t - 1) == TF1 Adam; Nesterov differs."""
    params, grads = helpers.problem(3, steps=5)

    def run(block):
        return helpers.run(
            gradtx.chain(block(0.8, 0.95, 1e-3), gradtx.scale_by_learning_rate(0.1)),
            params,
            grads,
            extra_args_seq=EXTRA,
        )[0]

    adam = run(gradtx.scale_by_adam)
    helpers.assert_trees_close(run(gradtx.scale_by_lazy_adam), adam, rtol=0, atol=0)
    helpers.assert_trees_close(run(gradtx.scale_by_adam_gs), adam, rtol=2e-6, atol=1e-6)
    nesterov = run(gradtx.scale_by_nesterov_adam)
    assert not np.allclose(nesterov[-1][0], adam[-1][0])


# --------------------------------------------------------------------------- the alias against TF's rule

# name -> (gradtx transform, float64 reference, slot names)
CASES = {
    "adam": (
        lambda: gradtx.adam(0.05, 0.8, 0.95, 1e-3),
        lambda: reference.adam(0.05, 0.8, 0.95, 1e-3),
        ["m", "v"],
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


def _check(name, sparse, *, x64):
    make_tx, make_ref, slots = CASES[name]
    helpers.compare_to_reference(
        make_tx,
        make_ref,
        sparse=sparse,
        x64=x64,
        slots=slots,
        atol32=5e-6 if name.startswith("adam") else 1e-6,
    )


@SPARSE
@pytest.mark.parametrize("name", list(CASES))
def test_float32_matches_the_float64_reference(name, sparse):
    _check(name, sparse, x64=False)


@SPARSE
@pytest.mark.parametrize("name", list(CASES))
def test_float64_matches_the_reference_formula_exactly(name, sparse):
    _check(name, sparse, x64=True)


def test_adam_beta_powers_are_tfs_float32_products():
    tx = gradtx.adam()
    state = tx.init(jnp.zeros(1))
    b1p = np.float32(0.9)
    for _ in range(30):
        _, state = tx.update(jnp.ones(1), state)
        b1p = np.float32(b1p * np.float32(0.9))
    assert np.float32(state[0].beta1_power) == b1p


@pytest.mark.parametrize(
    "make",
    [gradtx.adam, gradtx.lazy_adam, gradtx.nadam, lambda lr, **kw: gradtx.adamw(lr, weight_decay=0.01, **kw)],
)
def test_adam_mu_dtype_stores_m_rounded_and_steps_with_the_stored_moment(make):
    params = {"w": jnp.linspace(-1.0, 1.0, 6), "b": jnp.zeros(2)}
    grads = {"w": jnp.linspace(0.3, -0.2, 6), "b": jnp.array([1e-3, -2.0])}
    low, full = make(0.1, mu_dtype=jnp.bfloat16), make(0.1)
    s_low, s_full = low.init(params), full.init(params)
    assert gradtx.get_slot(s_low, "m")["w"].dtype == jnp.bfloat16
    assert gradtx.get_slot(s_low, "v")["w"].dtype == jnp.float32
    u_low, s_low = low.update(grads, s_low, params)
    u_full, s_full = full.update(grads, s_full, params)
    # m is computed in float32 and rounded once; the step uses that rounded m (bfloat16: 8 bits)
    jax.tree.map(
        lambda a, b: np.testing.assert_array_equal(a, b.astype(jnp.bfloat16)),
        gradtx.get_slot(s_low, "m"),
        gradtx.get_slot(s_full, "m"),
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=0.1 * 2**-8), u_low, u_full
    )  # lr * 2^-8
    assert not np.array_equal(u_low["w"], u_full["w"])
    u_low, _ = low.update(grads, s_low, params)
    assert jax.tree.map(lambda u: u.dtype, u_low) == {"w": jnp.float32, "b": jnp.float32}


@pytest.mark.parametrize("bad", ["int8", jnp.int32, "nope", 3])
def test_mu_dtype_must_be_a_float_dtype(bad):
    with pytest.raises(
        TypeError, match=r"`adam`: `mu_dtype` must be None or a floating-point or complex dtype"
    ):
        gradtx.adam(0.1, mu_dtype=bad)
    with pytest.raises(
        TypeError, match=r"`momentum`: `mu_dtype` must be None or a floating-point or complex dtype"
    ):
        gradtx.momentum(0.1, 0.9, mu_dtype=bad)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.adam, {"b1": 1.0}, r"`adam`: `b1` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.adam, {"b2": -0.1}, r"`adam`: `b2` must be in \[0.0, 1.0\), got -0.1"),
        (gradtx.adam, {"eps": -1.0}, r"`adam`: `eps` must be >= 0, got -1.0"),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
