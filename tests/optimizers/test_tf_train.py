"""The tf.train aliases (gradtx/optimizers/_tf_train.py, _tf_train_proximal.py) against float64
references of TF's rules (tests/reference.py).

Float32 runs must agree to TF's tolerance (rtol 1e-5, atol 1e-6); float64 runs (jax x64)
must agree to 1e-10, which pins the formula itself, not just its precision. Dense and
row-sparse gradients (with duplicate indices) are both checked.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers, reference

# name -> (gradtx transform, float64 reference, slot names)
CASES = {
    "sgd": (lambda: gradtx.sgd(0.1), lambda: reference.gradient_descent(0.1), []),
    "momentum": (lambda: gradtx.momentum(0.05, 0.9), lambda: reference.momentum(0.05, 0.9), ["momentum"]),
    "nesterov": (
        lambda: gradtx.momentum(0.05, 0.9, nesterov=True),
        lambda: reference.momentum(0.05, 0.9, True),
        ["momentum"],
    ),
    "adagrad": (lambda: gradtx.adagrad(0.1, 0.3), lambda: reference.adagrad(0.1, 0.3), ["accumulator"]),
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
    "adadelta": (
        lambda: gradtx.adadelta(1.0, 0.5, 1e-3),
        lambda: reference.adadelta(1.0, 0.5, 1e-3),
        ["accum", "accum_update"],
    ),
    "adam": (
        lambda: gradtx.adam(0.05, 0.8, 0.95, 1e-3),
        lambda: reference.adam(0.05, 0.8, 0.95, 1e-3),
        ["m", "v"],
    ),
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
    "rmsprop": (
        lambda: gradtx.rmsprop(0.01, 0.8, 0.7, 1e-6),
        lambda: reference.rmsprop(0.01, 0.8, 0.7, 1e-6),
        ["rms", "momentum"],
    ),
    "rmsprop-centered": (
        lambda: gradtx.rmsprop(0.01, 0.8, 0.0, 1e-6, centered=True),
        lambda: reference.rmsprop(0.01, 0.8, 0.0, 1e-6, centered=True),
        ["rms", "momentum", "mg"],
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


@SPARSE
@pytest.mark.parametrize(
    "block, nesterov, lazy",
    [(gradtx.scale_by_nesterov_adam, True, False), (gradtx.scale_by_lazy_adam, False, True)],
    ids=["nadam-sparse", "lazy"],
)
def test_adam_sparse_variants_match_the_reference(sparse, block, nesterov, lazy):
    tx = gradtx.chain(block(0.8, 0.95, 1e-3), gradtx.scale_by_learning_rate(0.05))
    params, grads = helpers.problem(4, sparse=sparse)
    expected, _ = reference.run(
        reference.adam(0.05, 0.8, 0.95, 1e-3, nesterov=nesterov, lazy=lazy), params, grads
    )
    with jax.enable_x64(True):
        actual, _ = helpers.run(
            tx, [np.asarray(p, np.float64) for p in params], helpers.to_gradtx(grads, dtype=np.float64)
        )
    for a, e in zip(actual, expected, strict=True):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10)


def test_gradient_descent_is_sgd():
    assert gradtx.gradient_descent is gradtx.sgd
    assert gradtx.proximal_gradient_descent is gradtx.proximal_sgd


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


def test_adam_beta_powers_are_tfs_float32_products():
    tx = gradtx.adam()
    state = tx.init(jnp.zeros(1))
    b1p = np.float32(0.9)
    for _ in range(30):
        _, state = tx.update(jnp.ones(1), state)
        b1p = np.float32(b1p * np.float32(0.9))
    assert np.float32(state[0].beta1_power) == b1p


def test_momentum_mu_dtype_keeps_accumulator_in_float32():
    tx = gradtx.momentum(0.1, 0.9, mu_dtype=jnp.float32)
    params = jnp.ones(3, jnp.bfloat16)
    state = tx.init(params)
    assert gradtx.get_slot(state, "momentum").dtype == jnp.float32
    updates, state = tx.update(jnp.ones(3, jnp.bfloat16), state, params)
    assert updates.dtype == jnp.bfloat16 and gradtx.get_slot(state, "momentum").dtype == jnp.float32


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
        (gradtx.sgd, {"learning_rate": -1.0}, r"`sgd`: `learning_rate` must be >= 0, got -1.0"),
        (
            gradtx.adagrad,
            {"learning_rate": 0.1, "initial_accumulator_value": 0.0},
            r"`adagrad`: `initial_accumulator_value` must be > 0, got 0.0",
        ),
        (
            gradtx.adagrad_da,
            {"learning_rate": 0.1, "initial_gradient_squared_accumulator_value": -1.0},
            r"`adagrad_da`: `initial_gradient_squared_accumulator_value` must be > 0",
        ),
        (gradtx.adagrad_da, {"learning_rate": 0.1, "l1": -0.1}, r"`adagrad_da`: `l1` must be >= 0, got -0.1"),
        (gradtx.adagrad_da, {"learning_rate": 0.1, "l2": -0.1}, r"`adagrad_da`: `l2` must be >= 0, got -0.1"),
        (gradtx.adadelta, {"rho": 1.5}, r"`adadelta`: `rho` must be in \[0.0, 1.0\], got 1.5"),
        (gradtx.adadelta, {"eps": -1e-8}, r"`adadelta`: `eps` must be >= 0"),
        (gradtx.adam, {"b1": 1.0}, r"`adam`: `b1` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.adam, {"b2": -0.1}, r"`adam`: `b2` must be in \[0.0, 1.0\), got -0.1"),
        (gradtx.adam, {"eps": -1.0}, r"`adam`: `eps` must be >= 0, got -1.0"),
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
        (gradtx.rmsprop, {"learning_rate": 0.1, "decay": 1.1}, r"`rmsprop`: `decay` must be in \[0.0, 1.0\]"),
        (
            gradtx.rmsprop,
            {"learning_rate": 0.1, "momentum": -0.1},
            r"`rmsprop`: `momentum` must be in \[0.0, 1.0\]",
        ),
        (gradtx.rmsprop, {"learning_rate": 0.1, "eps": -1.0}, r"`rmsprop`: `eps` must be >= 0"),
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
        (
            gradtx.rmsprop,
            {"learning_rate": 0.1, "centered": "yes"},
            r"`rmsprop`: `centered` must be True or False",
        ),
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
