"""gradtx/transforms/_sign.py: AddSign and PowerSign against float64 references of spec/TF_SEMANTICS.md.

The chains tested are the aliases' recipes, `chain(scale_by_addsign(...), scale_by_learning_rate(lr))`.
Dense and row-sparse gradients (with duplicate indices), 20 steps, with and without sign
decays: float32 runs agree with the float64 reference to TF's tolerance (rtol 1e-5, atol
1e-6); float64 runs (x64) to 1e-10, which pins the formula. Then the sparse rule (m decays
on every row, the variable moves on the touched rows, PowerSign's `pow(e, .)`), sign(0) = 0
and the count a sign decay sees. Their hyperparameters and argument errors are in
test_sign_args.py, RETURNN's NeuralOptimizer1 in test_neural_optimizer1.py (the contract
checks run in tests/test_contract.py).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.schedules import cosine_sign_decay, linear_sign_decay, restart_sign_decay
from gradtx.sparse import RowSparse
from gradtx.transforms import (
    ScaleByAddSignState,
    ScaleByPowerSignState,
    scale_by_addsign,
    scale_by_powersign,
)
from tests import helpers, reference
from tests.schedules.test_sign import ref_cosine, ref_linear, ref_restart


def addsign(learning_rate=0.1, alpha=1.0, beta=0.9, sign_decay=None):
    """The alias's recipe (tf.contrib.opt.AddSignOptimizer)."""
    return gradtx.chain(
        scale_by_addsign(alpha, beta, sign_decay), gradtx.scale_by_learning_rate(learning_rate)
    )


def powersign(learning_rate=0.1, base=math.e, beta=0.9, sign_decay=None):
    """The alias's recipe (tf.contrib.opt.PowerSignOptimizer)."""
    return gradtx.chain(
        scale_by_powersign(base, beta, sign_decay), gradtx.scale_by_learning_rate(learning_rate)
    )


# --------------------------------------------------------------------------- float64 references


def _sign_reference(lr, beta, multiplier):
    """`multiplier(sign_gm, t, sparse)`; m = m*beta + g*(1-beta) (sparse: densified g, every row)."""

    def step(var, g, s, t):
        m = s["m"] * beta + g * (1 - beta)
        return var - lr * multiplier(np.sign(g) * np.sign(m), t, False) * g, {"m": m}

    def sparse(var, indices, values, s, t):
        rows, g = reference.dedup(indices, values)
        dense = np.zeros_like(var)
        dense[rows] = g
        m = s["m"] * beta + dense * (1 - beta)
        var = var.copy()
        var[rows] -= lr * multiplier(np.sign(m[rows]) * np.sign(g), t, True) * g
        return var, {"m": m}

    return reference.Reference(lambda var: {"m": np.zeros_like(var)}, step, sparse)


def ref_addsign(lr, alpha, beta, decay):
    """ApplyAddSign: var -= lr * (alpha + decay(t-1) * sign(g) sign(m_new)) * g."""
    return _sign_reference(lr, beta, lambda sgm, t, sparse: alpha + decay(t - 1) * sgm)


def ref_powersign(lr, base, beta, decay):
    """ApplyPowerSign: var -= lr * exp(log(base) * decay(t-1) * sign(g) sign(m_new)) * g (sparse:
    pow(e, .))."""
    logbase = math.log(base)

    def multiplier(sgm, t, sparse):
        x = logbase * decay(t - 1) * sgm
        return np.power(np.e, x) if sparse else np.exp(x)

    return _sign_reference(lr, beta, multiplier)


# --------------------------------------------------------------------------- trajectories

# sign decays: (gradtx value, float64 reference of gs); a gradtx schedule's reference is its spec formula
DECAYS = {
    "none": (None, lambda gs: 1.0),
    "constant": (0.37, lambda gs: 0.37),
    "linear": (linear_sign_decay(16), lambda gs: ref_linear(gs, 16)),
    "cosine": (cosine_sign_decay(13, 1.7, zero_after=0.6), lambda gs: ref_cosine(gs, 13, 1.7, 0.6)),
    "restart": (restart_sign_decay(7, 2), lambda gs: ref_restart(gs, 7, 2)),
    "restart-zero-after": (restart_sign_decay(9, 3, zero_after=2), lambda gs: ref_restart(gs, 9, 3, 2)),
    "user": (lambda count: 0.5 ** (count / 4), lambda gs: 0.5 ** (gs / 4)),
}

# name -> (optimizer, its hyperparameters, decay key)
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
    "powersign": (powersign, {"learning_rate": 0.1, "base": math.e, "beta": 0.9}, "none"),
    "powersign-custom": (powersign, {"learning_rate": 0.05, "base": 3.0, "beta": 0.5}, "constant"),
    "powersign-linear": (powersign, {"learning_rate": 0.1, "base": math.e, "beta": 0.9}, "linear"),
    "powersign-cosine": (powersign, {"learning_rate": 0.1, "base": 2.0, "beta": 0.95}, "cosine"),
    "powersign-restart": (powersign, {"learning_rate": 0.1, "base": math.e, "beta": 1.0}, "restart"),
    "powersign-user": (powersign, {"learning_rate": 0.1, "base": 0.5, "beta": 0.9}, "user"),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


def _reference(name, *, x64):
    make, hyper, decay_key = CASES[name]
    value, ref_decay = DECAYS[decay_key]
    if x64 and callable(value):
        # gradtx's sign decays are float32 (as TF's), and so is `int32 count / 4`: the float64 run
        # must see the same values
        def ref_decay(gs, s=value):
            return float(s(jnp.int32(gs)))

    lr, h, beta = hyper["learning_rate"], hyper.get("alpha", hyper.get("base")), hyper["beta"]
    ref = ref_addsign if make is addsign else ref_powersign
    return make(**hyper, sign_decay=value), ref(lr, h, beta, ref_decay)


def _check(name, sparse, *, x64):
    tx, ref = _reference(name, x64=x64)
    params, grads = helpers.problem(3, sparse=sparse)
    expected, ref_slots = reference.run(ref, params, grads)
    if x64:
        with jax.enable_x64(True):
            p64 = [np.asarray(p, np.float64) for p in params]
            actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, dtype=np.float64))
            assert all(x.dtype == np.float64 for x in actual[-1])
        tol = {"rtol": 1e-10, "atol": 1e-10}
    else:
        actual, state = helpers.run(tx, params, helpers.to_gradtx(grads))
        tol = {"rtol": 1e-5, "atol": 1e-6}
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, msg=f"{name}: params after step {t + 1}", **tol)
    helpers.assert_trees_close(
        gradtx.get_slot(state, "m"), [s["m"] for s in ref_slots], msg=f"{name}: slot m", **tol
    )
    assert int(state[0].count) == len(grads)


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


def _sparse_case():
    rng = np.random.default_rng(11)
    params = jnp.asarray(rng.standard_normal((6, 2)), jnp.float32)
    m0 = jnp.asarray(rng.standard_normal((6, 2)), jnp.float32)
    g = RowSparse(jnp.array([4, 1, 4]), jnp.asarray(rng.standard_normal((3, 2)), jnp.float32), (6, 2))
    return params, m0, g


@pytest.mark.parametrize(
    "factory, cls",
    [(scale_by_addsign, ScaleByAddSignState), (scale_by_powersign, ScaleByPowerSignState)],
    ids=["addsign", "powersign"],
)
def test_sparse_m_decays_on_every_row_and_only_touched_rows_move(factory, cls):
    params, m0, g = _sparse_case()
    tx = factory(beta=0.75)
    u, state = jax.jit(tx.update)(g, cls(count=jnp.int32(0), m=m0))
    untouched = np.array([0, 2, 3, 5])
    np.testing.assert_array_equal(state.m[untouched], m0[untouched] * np.float32(0.75))
    dense = g.todense()
    touched = np.array([1, 4])
    np.testing.assert_allclose(state.m[touched], m0[touched] * 0.75 + dense[touched] * 0.25, rtol=1e-6)
    assert isinstance(u, RowSparse)
    new = gradtx.apply_updates(params, u)
    np.testing.assert_array_equal(new[untouched], params[untouched])
    assert np.asarray(u.indices).tolist() == [1, 4, 6]  # deduplicated, padded with the out-of-range row


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
