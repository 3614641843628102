"""gradtx/_algorithms/addsign.py: AddSign against float64 references of spec/TF_SEMANTICS.md, and the sign
rule it shares with PowerSign (gradtx/_algorithms/powersign.py: test_powersign.py).

The chains tested are the alias's recipe, `chain(scale_by_addsign(...), scale_by_learning_rate(lr))`.
Dense and row-sparse gradients (with duplicate indices), 20 steps, with and without sign
decays: float32 runs agree with the float64 reference to TF's tolerance (rtol 1e-5, atol
1e-6); float64 runs (x64) to 1e-10, which pins the formula. Then the shared rule (the state, sign(0) = 0,
TF's multipliers, the sparse rule: m decays on every row, the variable moves on the touched rows), the
count a sign decay sees, the hyperparameters (schedules, jax scalars) and the argument errors. RETURNN's
NeuralOptimizer1 is in test_neural_optimizer1.py (the contract checks run in tests/test_contract.py).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from gradtx.schedules import linear_sign_decay
from gradtx.sparse import RowSparse
from gradtx.transforms import (
    ScaleByAddSignState,
    ScaleByPowerSignState,
    scale_by_addsign,
    scale_by_powersign,
)
from tests import helpers
from tests.algorithms import _shared
from tests.algorithms._shared import addsign

# name -> (optimizer, its hyperparameters, decay key of _shared.DECAYS)
CASES = {
    "addsign": (addsign, {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.9}, "none"),
    "addsign-custom": (addsign, {"learning_rate": 0.05, "alpha": 0.7, "beta": 0.5}, "constant"),
    "addsign-linear": (addsign, {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.9}, "linear"),
    "addsign-cosine": (addsign, {"learning_rate": 0.1, "alpha": 1.5, "beta": 0.8}, "cosine"),
    "addsign-restart": (addsign, {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.9}, "restart"),
    "addsign-restart-zero-after": (
        addsign,
        {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.9},
        "restart-zero-after",
    ),
    "addsign-user": (addsign, {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.0}, "user"),
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


def test_state_has_count_and_tf_slot_m():
    params = {"w": jnp.ones((2, 3))}
    for factory, cls in (
        (scale_by_addsign, ScaleByAddSignState),
        (scale_by_powersign, ScaleByPowerSignState),
    ):
        state = factory().init(params)
        assert type(state) is cls and state._fields == ("count", "m")
        assert state.count.dtype == jnp.int32 and int(state.count) == 0
        np.testing.assert_array_equal(state.m["w"], np.zeros((2, 3)))


# --------------------------------------------------------------------------- the rule, piece by piece


def test_sign_of_zero_is_zero():
    """m is exactly 0 after g = [1], [-0.5] with beta = 0.5: the multiplier is alpha (1), not alpha - 1
    (0)."""
    for tx, expected in ((scale_by_addsign(1.0, 0.5), -0.5), (scale_by_powersign(2.0, 0.5), -0.5)):
        state = tx.init(jnp.zeros(1))
        _, state = tx.update(jnp.array([1.0]), state)
        u, state = tx.update(jnp.array([-0.5]), state)
        assert float(state.m[0]) == 0.0
        assert float(u[0]) == expected
    # and a zero gradient gives a zero update whatever m is
    u, _ = scale_by_addsign().update(jnp.array([0.0, 1.0]), scale_by_addsign().init(jnp.zeros(2)))
    assert [float(x) for x in u] == [0.0, 2.0]


def test_multipliers_are_tfs():
    g = jnp.array([2.0, -2.0])
    tx = scale_by_addsign(alpha=0.5, beta=0.0, sign_decay=0.25)  # beta 0: m = g, signs agree
    np.testing.assert_array_equal(tx.update(g, tx.init(g))[0], [1.5, -1.5])
    state = ScaleByAddSignState(count=jnp.int32(0), m=jnp.array([-10.0, 10.0]))  # m keeps its sign: disagree
    np.testing.assert_allclose(scale_by_addsign(0.5, 0.9, 0.25).update(g, state)[0], [0.5, -0.5])
    tx = scale_by_powersign(base=4.0, beta=0.0, sign_decay=0.5)  # 4 ** 0.5 = 2
    np.testing.assert_allclose(tx.update(g, tx.init(g))[0], [4.0, -4.0], rtol=1e-6)
    state = ScaleByPowerSignState(count=jnp.int32(0), m=jnp.array([-10.0, 10.0]))
    np.testing.assert_allclose(scale_by_powersign(4.0, 0.9, 0.5).update(g, state)[0], [1.0, -1.0], rtol=1e-6)


def test_sign_decay_sees_count_t_minus_1():
    seen = []

    def decay(count):
        seen.append(int(count))
        return 1.0

    tx = scale_by_addsign(sign_decay=decay)
    state = tx.init(jnp.zeros(2))
    for _ in range(3):
        _, state = tx.update(jnp.ones(2), state)
    assert seen == [0, 1, 2] and int(state.count) == 3


def test_linear_sign_decay_turns_addsign_into_sgd_times_alpha():
    """After decay_steps the linear decay is 0, so the step is lr * alpha * g (AddSign-ld's end state)."""
    tx = addsign(0.1, alpha=1.0, sign_decay=linear_sign_decay(3))
    params, state = jnp.zeros(2), tx.init(jnp.zeros(2))
    steps = []
    for _ in range(5):
        u, state = tx.update(jnp.array([1.0, -1.0]), state, params)
        steps.append(float(u[0]))
    np.testing.assert_allclose(steps, [-0.2, -0.1 * (1 + 2 / 3), -0.1 * (1 + 1 / 3), -0.1, -0.1], rtol=1e-6)


# --------------------------------------------------------------------------- row-sparse gradients


_sparse_case = _shared.sparse_case


@pytest.mark.parametrize("factory, cls", [(scale_by_addsign, ScaleByAddSignState)], ids=["addsign"])
def test_sparse_m_decays_on_every_row_and_only_touched_rows_move(factory, cls):
    _shared.check_sparse_sign_rule(factory, cls)


def test_sparse_addsign_touching_every_row_equals_dense_bit_for_bit():
    _, m0, _ = _sparse_case()
    values = jnp.asarray(np.random.default_rng(2).standard_normal((6, 2)), jnp.float32)
    order = jnp.array([5, 0, 3, 1, 4, 2])
    g = RowSparse(order, values[order], (6, 2))
    tx = scale_by_addsign(0.8, 0.6, 0.3)
    state = ScaleByAddSignState(count=jnp.int32(0), m=m0)
    u_sparse, s_sparse = tx.update(g, state)
    u_dense, s_dense = tx.update(values, state)
    np.testing.assert_array_equal(u_sparse.todense(), u_dense)
    np.testing.assert_array_equal(s_sparse.m, s_dense.m)


def test_sparse_padding_and_unique_row_sparse():
    params, _, g = _sparse_case()
    dedup = g.deduplicated()  # unique=True, padded with the out-of-range row 6
    assert int(dedup.indices[-1]) == 6
    for tx in (scale_by_addsign(), scale_by_powersign()):
        state = tx.init(params)
        a, sa = tx.update(g, state)
        b, sb = tx.update(dedup, state)
        np.testing.assert_array_equal(a.todense(), b.todense())
        np.testing.assert_array_equal(sa.m, sb.m)
        assert float(jnp.abs(b.values[-1]).sum()) == 0.0


# --------------------------------------------------------------------------- hyperparameters and errors


@pytest.mark.parametrize(
    "make, name, value",
    [
        (addsign, "learning_rate", 0.1),
        (addsign, "alpha", 0.7),
        (addsign, "beta", 0.8),
        (addsign, "sign_decay", 0.6),
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


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (scale_by_addsign, {"beta": 1.5}, r"`scale_by_addsign`: `beta` must be in \[0.0, 1.0\], got 1.5\."),
        (scale_by_addsign, {"beta": -0.1}, r"`scale_by_addsign`: `beta` must be in \[0.0, 1.0\], got -0.1\."),
        (scale_by_addsign, {"alpha": float("inf")}, r"`scale_by_addsign`: `alpha` must be finite, got inf\."),
        (scale_by_addsign, {"alpha": float("nan")}, r"`scale_by_addsign`: `alpha` must be finite, got nan\."),
        (scale_by_addsign, {"sign_decay": float("nan")}, r"`scale_by_addsign`: `sign_decay` must be finite"),
        (
            addsign,
            {"learning_rate": -0.1},
            r"`scale_by_learning_rate`: `learning_rate` must be >= 0, got -0.1\.",
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
            scale_by_addsign,
            {"alpha": "1"},
            r"`scale_by_addsign`: `alpha` must be a number, a scalar array or a sch",
        ),
        (
            scale_by_addsign,
            {"beta": None},
            r"`scale_by_addsign`: `beta` must be a number, a scalar array or a sch",
        ),
        (
            scale_by_addsign,
            {"sign_decay": "cosine"},
            r"`scale_by_addsign`: `sign_decay` must be a number, a scalar array or a schedule .*got 'cosine'",
        ),
        (scale_by_addsign, {"sign_decay": True}, r"`sign_decay` must be a number, .*got True of type bool"),
        (scale_by_addsign, {"sign_decay": jnp.ones(3)}, r"`scale_by_addsign`: `sign_decay` must be a scalar"),
    ],
)
def test_type_errors(factory, kwargs, match):
    with pytest.raises(TypeError, match=match):
        factory(**kwargs)
