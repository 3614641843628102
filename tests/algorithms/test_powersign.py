"""gradtx/_algorithms/powersign.py: PowerSign against float64 references of spec/TF_SEMANTICS.md.

The chains tested are the alias's recipe, `chain(scale_by_powersign(...), scale_by_learning_rate(lr))`.
Dense and row-sparse gradients (with duplicate indices), 20 steps, with and without sign
decays: float32 runs agree with the float64 reference to TF's tolerance (rtol 1e-5, atol
1e-6); float64 runs (x64) to 1e-10, which pins the formula. Then the sparse rule (m decays on every row,
the variable moves on the touched rows, contrib's `pow(e, .)`), the hyperparameters (schedules, jax
scalars, traced values) and the argument errors. The sign rule it shares with AddSign (the state, sign(0),
TF's multipliers) is checked in test_addsign.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradtx.sparse import RowSparse
from gradtx.transforms import ScaleByPowerSignState, scale_by_powersign
from tests import helpers
from tests.algorithms import _shared
from tests.algorithms._shared import powersign

# name -> (optimizer, its hyperparameters, decay key of _shared.DECAYS)
CASES = {
    "powersign": (powersign, {"learning_rate": 0.1, "base": math.e, "beta": 0.9}, "none"),
    "powersign-custom": (powersign, {"learning_rate": 0.05, "base": 3.0, "beta": 0.5}, "constant"),
    "powersign-linear": (powersign, {"learning_rate": 0.1, "base": math.e, "beta": 0.9}, "linear"),
    "powersign-cosine": (powersign, {"learning_rate": 0.1, "base": 2.0, "beta": 0.95}, "cosine"),
    "powersign-restart": (powersign, {"learning_rate": 0.1, "base": math.e, "beta": 1.0}, "restart"),
    "powersign-user": (powersign, {"learning_rate": 0.1, "base": 0.5, "beta": 0.9}, "user"),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


def _check(name, sparse, *, x64):
    """The case `name` against its float64 reference (tests/algorithms/_shared.py)."""
    _shared.check_sign_case(CASES[name], name, sparse, x64=x64)


@SPARSE
@pytest.mark.parametrize("name", list(CASES))
def test_float32_matches_the_float64_reference(name, sparse):
    _check(name, sparse, x64=False)


@SPARSE
@pytest.mark.parametrize("name", list(CASES))
def test_float64_matches_the_reference_formula_exactly(name, sparse):
    _check(name, sparse, x64=True)


# --------------------------------------------------------------------------- row-sparse gradients


_sparse_case = _shared.sparse_case


@pytest.mark.parametrize("factory, cls", [(scale_by_powersign, ScaleByPowerSignState)], ids=["powersign"])
def test_sparse_m_decays_on_every_row_and_only_touched_rows_move(factory, cls):
    _shared.check_sparse_sign_rule(factory, cls)


def test_sparse_powersign_uses_pow_of_float32_e_and_dense_uses_exp():
    """contrib's sparse path computes pow(float32(e), x), the kernel exp(x): in float32 they differ by
    about 3e-8 * |x| relative, which at x = 20 (base e**20) is ~6e-7, about 10 ulps."""
    base = math.exp(20.0)
    tx = scale_by_powersign(base=base, beta=0.0)
    g = jnp.array([[1.0, -1.0]], jnp.float32)
    e32 = np.float64(np.float32(math.e))
    pow_form, exp_form = np.float32(e32**20.0), np.float32(math.exp(20.0))
    assert abs(pow_form / exp_form - 1) > 4e-7
    u_sparse, _ = tx.update(RowSparse(jnp.array([0]), g, (1, 2)), tx.init(jnp.zeros((1, 2))))
    u_dense, _ = tx.update(g, tx.init(jnp.zeros((1, 2))))
    np.testing.assert_allclose(np.asarray(u_sparse.values[0], np.float64), [pow_form, -pow_form], rtol=2e-7)
    np.testing.assert_allclose(np.asarray(u_dense[0], np.float64), [exp_form, -exp_form], rtol=2e-7)


# --------------------------------------------------------------------------- hyperparameters and errors


@pytest.mark.parametrize(
    "make, name, value",
    [
        (powersign, "learning_rate", 0.1),
        (powersign, "base", 3.0),
        (powersign, "beta", 0.8),
        (powersign, "sign_decay", 0.6),
    ],
)
def test_every_hyperparameter_accepts_a_schedule_and_a_jax_scalar(make, name, value):
    params, grads = helpers.problem(1)
    plain, _ = helpers.run(make(**{name: value}), params, grads[:5])

    def schedule(count):
        return jnp.asarray(value, jnp.float32)

    scheduled, _ = helpers.run(make(**{name: schedule}), params, grads[:5])
    scalar, _ = helpers.run(make(**{name: jnp.float32(value)}), params, grads[:5])
    helpers.assert_trees_close(scheduled[-1], plain[-1], rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(scalar[-1], plain[-1], rtol=1e-6, atol=1e-7)


def test_hyperparameters_may_be_traced():
    params, grads = helpers.problem(0)

    @jax.jit
    def built_inside_jit(lr, base, beta, decay, g, p):
        tx = powersign(lr, base, beta, decay)  # checks skip traced values
        return tx.update(g, tx.init(p), p)[0]

    out = built_inside_jit(0.1, 3.0, 0.5, 0.7, grads[0], params)
    tx = powersign(0.1, 3.0, 0.5, 0.7)
    helpers.assert_trees_close(out, tx.update(grads[0], tx.init(params), params)[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (scale_by_powersign, {"base": 0.0}, r"`scale_by_powersign`: `base` must be > 0, got 0.0\."),
        (scale_by_powersign, {"base": -2.0}, r"`scale_by_powersign`: `base` must be > 0, got -2.0\."),
        (
            scale_by_powersign,
            {"base": float("inf")},
            r"`scale_by_powersign`: `base` must be finite, got inf\.",
        ),
        (
            scale_by_powersign,
            {"beta": 2.0},
            r"`scale_by_powersign`: `beta` must be in \[0.0, 1.0\], got 2.0\.",
        ),
        (
            scale_by_powersign,
            {"sign_decay": float("-inf")},
            r"`scale_by_powersign`: `sign_decay` must be finite",
        ),
    ],
)
def test_value_errors(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            scale_by_powersign,
            {"base": "e"},
            r"`scale_by_powersign`: `base` must be a number, a scalar array or",
        ),
        (scale_by_powersign, {"sign_decay": [0.5]}, r"`scale_by_powersign`: `sign_decay` must be a number"),
    ],
)
def test_type_errors(factory, kwargs, match):
    with pytest.raises(TypeError, match=match):
        factory(**kwargs)
