"""gradtx/_algorithms/ftrl.py: scale_by_ftrl, TF's ApplyFtrl / ApplyFtrlV2 as a building block, and the alias
`ftrl` against the float64 reference of TF's rule.

The alias is compared with TF in tests/parity/test_ftrl.py. Here: the block's numbers in float64 (a
row-sparse and a dense leaf in one tree) with `learning_rate_power` known at construction (the sqrt fast
path of -0.5) and as a schedule (the branch chosen at run time), its slots, the strict `|linear| > l1`, and
the errors; the alias's numbers against tests/reference.py in float32 (TF's tolerance) and float64 (1e-10),
dense and row-sparse, hyperparameters as jax scalars and tracers, the rules that need the params (FTRL's,
proximal SGD's, AdagradDA's), and the alias's errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import ScaleByFtrlState, scale_by_ftrl
from tests import helpers, reference

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def _check(block, ref):
    """Float64: `chain(block, scale_by_learning_rate(1.0))` against `ref`, params after each step, slots."""
    params, grads = _problem()
    expected, ref_slots = reference.run(ref, params, grads)
    with jax.enable_x64(True):
        tx = gradtx.chain(block, gradtx.scale_by_learning_rate(1.0))
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    for slot in ("accum", "linear"):
        helpers.assert_trees_close(
            gradtx.get_slot(state, slot), [s[slot] for s in ref_slots], rtol=1e-10, atol=1e-10, msg=slot
        )


def test_fast_path_matches_the_float64_reference_dense_and_row_sparse():
    """learning_rate_power = -0.5 known at construction: the square roots of TF's special case."""
    _check(
        scale_by_ftrl(0.4, -0.5, initial_accumulator_value=0.3, l1=0.1, l2=0.2),
        reference.ftrl(0.4, -0.5, init=0.3, l1=0.1, l2=0.2),
    )


def test_power_chosen_at_run_time_matches_the_float64_reference():
    """A power schedule alternating -0.5 and -0.7 (FtrlV2: shrinkage, and beta folded into l2): each step
    takes the branch of its power."""

    def ref_step(var, g, s, t):
        power = -0.5 if t % 2 else -0.7
        return reference.ftrl(0.4, power, 0.3, 0.05, 0.1, shrinkage=0.1, beta=0.3).step(var, g, s, t)

    block = scale_by_ftrl(
        0.4,
        lambda count: jnp.where(count % 2 == 0, -0.5, -0.7),
        initial_accumulator_value=0.3,
        l1=0.05,
        l2=0.1,
        l2_shrinkage=0.1,
        beta=0.3,
    )
    _check(block, reference.Reference(reference.ftrl(0.4, init=0.3).init, ref_step))


def test_power_minus_half_known_scheduled_or_traced_agree():
    """Known at construction the branch is fixed; a schedule or a traced power takes the sqrt branch at run
    time, with the same float32 numbers (up to XLA fusing the two programs differently)."""
    params, grads = helpers.problem(1, shapes=[(7,)], steps=3)

    def run(power):
        tx = scale_by_ftrl(0.3, power, l1=0.01)
        state, var, out = tx.init(params[0]), jnp.asarray(params[0]), []
        for (g,) in grads:
            u, state = tx.update(jnp.asarray(g), state, var)
            var = var - u
            out.append(var)
        return out

    static = jax.jit(lambda: run(-0.5))()
    helpers.assert_trees_close(jax.jit(lambda: run(lambda count: -0.5))(), static, rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(jax.jit(run)(jnp.float32(-0.5)), static, rtol=1e-6, atol=1e-7)


def test_power_zero_is_a_fixed_rate():
    """pow(., 0) = 1: the sigma term vanishes (linear += g) and the new weight is (l1 sign(z) - z) / (1/lr +
    2 l2)."""
    lr, l1, l2 = 0.5, 0.1, 0.25
    tx = scale_by_ftrl(lr, 0.0, l1=l1, l2=l2)
    var, state, update = jnp.array([1.0, -2.0, 0.5]), tx.init(jnp.zeros(3)), jax.jit(tx.update)
    z = np.zeros(3)
    for g in ([0.3, -0.05, 2.0], [0.4, 0.02, -1.0]):
        u, state = update(jnp.array(g), state, var)
        z += np.array(g)
        expected = np.where(np.abs(z) > l1, (l1 * np.sign(z) - z) / (1 / lr + 2 * l2), 0.0)
        var = var - u
        np.testing.assert_allclose(var, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(state.linear, z, rtol=1e-6)


def test_weights_are_zero_unless_linear_exceeds_l1_strictly():
    """From accum = 0 and var = 0, linear = g after one step: |g| == l1 gives 0, just above gives a weight."""
    tx = scale_by_ftrl(1.0, initial_accumulator_value=0.0, l1=0.5)
    g = jnp.array([0.5, -0.5, np.nextafter(np.float32(0.5), np.float32(1))])
    u, state = jax.jit(tx.update)(g, tx.init(jnp.zeros(3)), jnp.zeros(3))
    np.testing.assert_array_equal(state.linear, g)
    new = -np.asarray(u)
    assert new[0] == 0.0 and new[1] == 0.0 and new[2] < 0.0


def test_state_has_tfs_slot_names_and_initial_values():
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = scale_by_ftrl(0.1, initial_accumulator_value=0.7).init(params)
    assert type(state) is ScaleByFtrlState and state._fields == ("count", "accum", "linear")
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    helpers.assert_trees_close(state.accum, jax.tree.map(lambda p: np.full_like(p, 0.7), params))
    helpers.assert_trees_close(state.linear, jax.tree.map(np.zeros_like, params), atol=0)
    assert scale_by_ftrl(0.1).init(jnp.zeros(1)).accum[0] == np.float32(0.1)  # TF's default


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"learning_rate": float("nan")}, r"`scale_by_ftrl`: `learning_rate` must be finite, got nan\."),
        ({"learning_rate_power": 0.5}, r"`scale_by_ftrl`: `learning_rate_power` must be <= 0, got 0.5\."),
        (
            {"learning_rate_power": float("-inf")},
            r"`scale_by_ftrl`: `learning_rate_power` must be finite, got -inf\.",
        ),
        (
            {"initial_accumulator_value": -0.1},
            r"`scale_by_ftrl`: `initial_accumulator_value` must be >= 0, got -0.1\.",
        ),
        ({"l1": -1.0}, r"`scale_by_ftrl`: `l1` must be >= 0, got -1.0\."),
        ({"l2": -1.0}, r"`scale_by_ftrl`: `l2` must be >= 0, got -1.0\."),
        ({"l2_shrinkage": -1.0}, r"`scale_by_ftrl`: `l2_shrinkage` must be >= 0, got -1.0\."),
        ({"beta": -1.0}, r"`scale_by_ftrl`: `beta` must be >= 0, got -1.0\."),
        ({"l1": float("inf")}, r"`scale_by_ftrl`: `l1` must be finite, got inf\."),
        ({"learning_rate": 0.0}, r"`scale_by_ftrl`: `learning_rate` must be > 0, got 0.0\."),
        (
            {"learning_rate": gradtx.schedules.linear_warmup(0.1, 10)},
            r"`scale_by_ftrl`: the schedule given as `learning_rate` must stay > 0 .*got 0.0 at step 0\.",
        ),
    ],
)
def test_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scale_by_ftrl(**{"learning_rate": 0.1, **kwargs})


def test_bad_types():
    with pytest.raises(
        TypeError, match=r"`scale_by_ftrl`: `initial_accumulator_value` must be a number or a"
    ):
        scale_by_ftrl(0.1, initial_accumulator_value=lambda count: 0.1)
    with pytest.raises(
        TypeError, match=r"`scale_by_ftrl`: `l2_shrinkage` must be a number, a scalar array or"
    ):
        scale_by_ftrl(0.1, l2_shrinkage=None)


# --------------------------------------------------------------------------- the alias against TF's rule

# name -> (gradtx transform, float64 reference, slot names)
TF_CASES = {
    "ftrl": (lambda: gradtx.ftrl(0.3), lambda: reference.ftrl(0.3), ["accum", "linear"]),
    "ftrl-l1-l2-shrinkage-beta": (
        lambda: gradtx.ftrl(0.3, l1=0.1, l2=0.2, l2_shrinkage=0.1, beta=0.3),
        lambda: reference.ftrl(0.3, l1=0.1, l2=0.2, shrinkage=0.1, beta=0.3),
        ["accum", "linear"],
    ),
    "ftrl-power-0": (
        lambda: gradtx.ftrl(0.3, learning_rate_power=0.0, l1=0.05),
        lambda: reference.ftrl(0.3, power=0.0, l1=0.05),
        ["accum", "linear"],
    ),
    "ftrl-power-0.7-init-0": (
        lambda: gradtx.ftrl(0.3, learning_rate_power=-0.7, initial_accumulator_value=0.0),
        lambda: reference.ftrl(0.3, power=-0.7, init=0.0),
        ["accum", "linear"],
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


def test_rules_that_read_params_say_so_when_they_are_missing():
    for tx, name in [
        (gradtx.ftrl(0.1), "scale_by_ftrl"),
        (gradtx.proximal_sgd(0.1), "scale_by_proximal_sgd"),
        (gradtx.adagrad_da(0.1), "scale_by_adagrad_da"),
    ]:
        with pytest.raises(ValueError, match=rf"`{name}`: `update` needs the current parameters"):
            tx.update(jnp.ones(2), tx.init(jnp.ones(2)))


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.ftrl,
            {"learning_rate": 0.1, "learning_rate_power": 0.5},
            r"`ftrl`: `learning_rate_power` must be <= 0, got 0.5",
        ),
        (
            gradtx.ftrl,
            {"learning_rate": 0.1, "initial_accumulator_value": -0.1},
            r"`ftrl`: `initial_accumulator_value` must be >= 0, got -0.1",
        ),
        (gradtx.ftrl, {"learning_rate": 0.1, "l1": -1.0}, r"`ftrl`: `l1` must be >= 0"),
        (gradtx.ftrl, {"learning_rate": 0.1, "l2": -1.0}, r"`ftrl`: `l2` must be >= 0"),
        (gradtx.ftrl, {"learning_rate": 0.1, "l2_shrinkage": -1.0}, r"`ftrl`: `l2_shrinkage` must be >= 0"),
        (gradtx.ftrl, {"learning_rate": 0.1, "beta": -1.0}, r"`ftrl`: `beta` must be >= 0"),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


def test_hyperparameters_may_be_jax_scalars_and_tracers():
    params, grads = helpers.problem(0)
    plain, _ = helpers.run(gradtx.ftrl(0.3, l1=0.1), params, grads[:3])
    arrays, _ = helpers.run(gradtx.ftrl(jnp.float32(0.3), l1=jnp.float32(0.1)), params, grads[:3])
    helpers.assert_trees_close(arrays[-1], plain[-1], rtol=0, atol=0)

    @jax.jit
    def built_inside_jit(lr, power, g, p):
        tx = gradtx.ftrl(lr, learning_rate_power=power)  # checks skip traced values; -0.5 decided at run time
        return tx.update(g, tx.init(p), p)[0]

    out = built_inside_jit(0.3, -0.5, grads[0], params)
    tx = gradtx.ftrl(0.3)
    helpers.assert_trees_close(out, tx.update(grads[0], tx.init(params), params)[0], rtol=1e-6, atol=1e-6)
