"""gradtx.second_order (gradtx/second_order/_hessian.py) against optax.second_order and against the exact
Hessian (`jax.hessian`) of a small two-layer network's loss."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import flatten_util

import gradtx.optax_compat as compat
from gradtx import second_order

RNG = np.random.default_rng(0)
PARAMS = {
    "w1": jnp.asarray(RNG.standard_normal((3, 4)), jnp.float32),
    "b1": jnp.asarray(RNG.standard_normal(4), jnp.float32),
    "w2": jnp.asarray(RNG.standard_normal(4), jnp.float32),
}
X = jnp.asarray(RNG.standard_normal((8, 3)), jnp.float32)
Y = jnp.asarray(RNG.integers(0, 2, 8), jnp.float32)


def _nll(params, inputs, targets):
    """Logistic regression on a tanh layer: the mean negative log likelihood."""
    logits = jnp.tanh(inputs @ params["w1"] + params["b1"]) @ params["w2"]
    return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, targets))


def _optax(name, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # optax 0.2.8 deprecates them (removal in 0.2.9)
        return getattr(optax.second_order, name)(*args)


def test_hvp_hessian_diag_and_fisher_diag_equal_optaxs():
    flat, unravel = flatten_util.ravel_pytree(PARAMS)
    v = jnp.asarray(RNG.standard_normal(flat.size), jnp.float32)
    ours = jax.jit(
        lambda: (
            compat.second_order.hvp(_nll, v, PARAMS, X, Y),
            compat.second_order.hessian_diag(_nll, PARAMS, X, Y),
            compat.second_order.fisher_diag(_nll, PARAMS, X, Y),
        )
    )()
    theirs = jax.jit(
        lambda: (
            _optax("hvp", _nll, v, PARAMS, X, Y),
            _optax("hessian_diag", _nll, PARAMS, X, Y),
            _optax("fisher_diag", _nll, PARAMS, X, Y),
        )
    )()
    for a, e in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def test_against_the_exact_hessian_in_float64():
    with jax.enable_x64(True):
        params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), PARAMS)
        x, y = jnp.asarray(X, jnp.float64), jnp.asarray(Y, jnp.float64)
        flat, unravel = flatten_util.ravel_pytree(params)
        v = jnp.asarray(RNG.standard_normal(flat.size))

        @jax.jit
        def both(params, v):
            ours = (
                flatten_util.ravel_pytree(second_order.hvp(_nll, v, params, x, y))[0],
                second_order.hessian_diag(_nll, params, x, y),
                second_order.fisher_diag(_nll, params, x, y),
            )
            hessian = jax.hessian(lambda f: _nll(unravel(f), x, y))(flat)
            grad = jax.grad(lambda f: _nll(unravel(f), x, y))(flat)
            return ours, (hessian @ v, jnp.diag(hessian), grad**2)

        ours, exact = both(params, v)
        assert ours[0].dtype == jnp.float64
        for a, e in zip(ours, exact, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: second_order.hvp(_nll, jnp.ones(3), PARAMS, X, Y), ValueError,
         r"`hvp`: `v` must have one entry per parameter element, shape \(20,\); got shape \(3,\)\."),
        (lambda: second_order.hvp("loss", jnp.ones(20), PARAMS, X, Y), TypeError,
         r"`hvp`: `loss` must be callable, got 'loss'"),
        (lambda: second_order.hessian_diag(None, PARAMS, X, Y), TypeError,
         r"`hessian_diag`: `loss` must be callable, got None"),
        (lambda: second_order.fisher_diag(3, PARAMS, X, Y), TypeError,
         r"`fisher_diag`: `negative_log_likelihood` must be callable, got 3"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()
