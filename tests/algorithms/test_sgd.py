"""gradtx/_algorithms/sgd.py: `sgd` (tf.train's GradientDescentOptimizer) against the float64 reference of
TF's rule, and `noisy_sgd` against optax's.

Here: SGD's numbers against tests/reference.py in float32 (TF's tolerance) and float64 (1e-10), dense and
row-sparse, its name `gradient_descent` and its errors; noisy SGD without noise beside optax's (20 jitted
steps, gradtx's name and optax_compat's, whose state is optax's), its noise's distribution, its key or seed,
and its errors.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as optax_compat
from tests import helpers, reference
from tests.algorithms import _shared

# name -> (gradtx transform, float64 reference, slot names)
TF_CASES = {
    "sgd": (lambda: gradtx.sgd(0.1), lambda: reference.gradient_descent(0.1), []),
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


def test_gradient_descent_is_sgd():
    assert gradtx.gradient_descent is gradtx.sgd
    assert gradtx.proximal_gradient_descent is gradtx.proximal_sgd


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.sgd, {"learning_rate": -1.0}, r"`sgd`: `learning_rate` must be >= 0, got -1.0"),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


# --------------------------------------------------------------------------- noisy SGD against optax

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
STEPS = 20


def _problem(seed=0, steps=STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = {k: jnp.asarray(rng.standard_normal((steps, *s)), jnp.float32) for k, s in SHAPES.items()}
    return params, grads


# name: (gradtx, optax_compat, optax); each a function of no arguments building the optimizer
CASES = {
    "noisy_sgd-without-noise": (  # the noise itself is gradtx's: see test_noisy_sgd_draws_optax_s_noise
        lambda: gradtx.noisy_sgd(0.05, eta=0.0),
        lambda: optax_compat.noisy_sgd(0.05, eta=0.0, key=0),
        lambda: optax.noisy_sgd(0.05, eta=0.0, key=0),
    ),
}
OWN_NOISE = {"noisy_sgd-without-noise"}  # optax's key moves every step, gradtx's noise folds in the count


@functools.cache
def _jitted_runs():
    """Every case's three trajectories and final states, each library's cases compiled as one program."""
    return _shared.three_library_runs(CASES, _problem)


@pytest.mark.parametrize("name", CASES)
def test_twenty_jitted_steps_equal_optax(name):
    _shared.check_jitted_runs(_jitted_runs(), name, STEPS, own_noise=OWN_NOISE)


def test_noisy_sgd_draws_optax_s_noise():
    """Zero gradients, rate 1: the steps are the noise. Each step's is centred, of standard deviation
    sqrt(eta / t^gamma) (within 1%: 16 standard errors on 2**17 draws) like optax's, and new at every step."""
    eta, gamma, n = 0.3, 0.8, 2**17
    params = jnp.zeros(n)

    @jax.jit
    def steps(params):
        out = []
        for tx in (gradtx.noisy_sgd(1.0, eta, gamma, seed=5), optax_compat.noisy_sgd(1.0, eta, gamma, key=5)):
            state = tx.init(params)
            for _ in range(3):
                u, state = tx.update(jnp.zeros(n), state, params)
                out.append(-u)
        tx = optax.noisy_sgd(1.0, eta, gamma, key=5)
        state = tx.init(params)
        for _ in range(3):
            u, state = tx.update(jnp.zeros(n), state, params)
            out.append(-u)
        return jnp.stack(out).reshape(3, 3, n)

    noise = np.asarray(steps(params), np.float64)
    np.testing.assert_array_equal(noise[0], noise[1])  # optax_compat's is gradtx's
    for t in range(3):
        want = np.sqrt(eta / (t + 1) ** gamma)
        for lib in (0, 2):
            np.testing.assert_allclose(noise[lib, t].std(), want, rtol=0.01, err_msg=f"{lib}: step {t + 1}")
            assert abs(noise[lib, t].mean()) < 5 * want / np.sqrt(n), (lib, t)
    assert abs(np.corrcoef(noise[0, 0], noise[0, 1])[0, 1]) < 0.02


def test_noisy_sgd_takes_a_key_or_a_seed_not_both():
    with pytest.raises(ValueError, match=r"`noisy_sgd`: give `key` or `seed` \(deprecated\), not both"):
        optax_compat.noisy_sgd(0.1, key=1, seed=1)
    params = jnp.zeros(3)
    for tx in (optax_compat.noisy_sgd(0.1, key=jax.random.key(4)), optax_compat.noisy_sgd(0.1, seed=4)):
        assert tx.init(params)[0].rng_key == jax.random.key(4)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (gradtx.noisy_sgd, {"eta": -0.1}, ValueError, r"`noisy_sgd`: `eta` must be >= 0, got -0.1"),
        (gradtx.noisy_sgd, {"gamma": "0.5"}, TypeError, r"`noisy_sgd`: `gamma` must be a number"),
        (gradtx.noisy_sgd, {"seed": 0.5}, TypeError, r"`noisy_sgd`: `seed` must be an int"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
