"""gradtx.numerics against optax's functions of the same names (optax_compat's are the same objects)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import numerics
from gradtx import optax_compat as compat

optax = pytest.importorskip("optax")

TOL = {"rtol": 1e-6, "atol": 1e-6}

X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
CASES = [  # (x, min_norm, ord, axis, keepdims)
    (X, 0.1, None, None, False),
    (X, 100.0, None, None, False),
    (X, 0.5, 1, 0, False),
    (X, 1.0, 2, 1, True),
    (X, 0.1, np.inf, 1, False),
    (X, 2.0, "fro", (0, 1), False),
    (X, 0.1, "nuc", None, True),
    (np.zeros((3, 4), np.float32), 0.0, None, None, False),
    (np.zeros((3, 4), np.float32), 3.0, None, 1, False),
    (X[0], 0.1, 3, None, False),
]


def test_safe_norm_and_its_gradient_equal_optax_s():
    def both(fn, x, min_norm, ord, axis, keepdims):
        f = functools.partial(fn, min_norm=min_norm, ord=ord, axis=axis, keepdims=keepdims)
        return f(x), jax.jacfwd(f)(x)

    @jax.jit
    def run(xs):
        ours = [both(numerics.safe_norm, x, *rest) for x, (_, *rest) in zip(xs, CASES, strict=True)]
        theirs = [both(optax.safe_norm, x, *rest) for x, (_, *rest) in zip(xs, CASES, strict=True)]
        return ours, theirs

    ours, theirs = run([jnp.asarray(c[0]) for c in CASES])
    for (a, da), (b, db) in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, **TOL)
        np.testing.assert_allclose(da, db, **TOL)
        assert np.all(np.isfinite(da))
    assert compat.safe_norm is numerics.safe_norm


def test_safe_root_mean_squares_and_its_gradient_equal_optax_s():
    xs = [X, np.zeros(5, np.float32), (X + 1j * X[::-1]).astype(np.complex64)]
    floors = [0.1, 0.5, 2.0]

    @jax.jit
    def run(xs):
        out = []
        for fn in (numerics.safe_root_mean_squares, optax.safe_root_mean_squares):
            f = [functools.partial(fn, min_rms=r) for r in floors]
            out.append([(g(x), jax.grad(lambda x, g=g: jnp.real(g(x)))(x)) for g in f for x in xs[:2]])
            out.append([g(xs[2]) for g in f])
        return out

    ours, ours_complex, theirs, theirs_complex = run(xs)
    for (a, da), (b, db) in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, **TOL)
        np.testing.assert_allclose(da, db, **TOL)
    np.testing.assert_allclose(ours_complex, theirs_complex, **TOL)
    assert ours[1][0] == np.float32(0.1) and np.all(
        np.asarray(ours[1][1]) == 0
    )  # zeros: the floor, gradient 0


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint32", "float16", "bfloat16", "float32"])
def test_safe_increment_counts_and_saturates_as_optax(dtype):
    dtype = jnp.dtype(dtype)
    top = jnp.iinfo(dtype).max if jnp.issubdtype(dtype, jnp.integer) else jnp.finfo(dtype).max
    counts = jnp.asarray([0, 3, top], dtype)
    ours = jax.jit(jax.vmap(numerics.safe_increment))(counts)
    np.testing.assert_array_equal(ours, jax.vmap(optax.safe_increment)(counts))
    assert ours.dtype == dtype and np.asarray(ours)[1] == 4 and np.asarray(ours)[2] == top
    assert compat.safe_int32_increment is compat.safe_increment is numerics.safe_increment


def test_safe_increment_of_a_float_at_inf_or_nan_stops_at_the_maximum_as_optax():
    counts = jnp.asarray([jnp.inf, jnp.nan], jnp.float32)
    np.testing.assert_array_equal(numerics.safe_increment(counts), optax.safe_increment(counts))


@pytest.mark.parametrize("dtype", ["bool", "complex64"])
def test_safe_increment_refuses_a_dtype_without_a_maximum(dtype):
    with pytest.raises(ValueError, match=r"`safe_increment`: `count` must have an integer or floating"):
        numerics.safe_increment(jnp.asarray(1, dtype))


def test_scale_gradient_keeps_the_value_and_scales_the_gradient_as_optax():
    tree = {"a": jnp.arange(3.0), "b": (jnp.ones((2, 2)), 2.0)}

    def loss(fn, scale, t):
        t = fn(t, scale)
        return jnp.sum(jnp.sin(t["a"])) + jnp.sum(t["b"][0] ** 2) * t["b"][1]

    @jax.jit
    def run(t, traced):
        out = []
        for scale in (1.0, 0.0, -2.5, 0.3):  # gradtx's also takes a traced scale (optax's cannot)
            ours = jax.value_and_grad(
                functools.partial(loss, numerics.scale_gradient, traced if scale == 0.3 else scale)
            )
            out += [ours(t), jax.value_and_grad(functools.partial(loss, optax.scale_gradient, scale))(t)]
        return out

    out = run(tree, jnp.float32(0.3))
    for k in range(0, len(out), 2):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), out[k], out[k + 1])
    _, plain = jax.value_and_grad(functools.partial(loss, lambda t, s: t, None))(tree)
    jax.tree.map(lambda g, p: np.testing.assert_allclose(g, -2.5 * p, **TOL), out[4][1], plain)
    assert np.all(np.asarray(out[2][1]["a"]) == 0)  # a scale of 0 stops the gradient


def test_multi_normal_samples_and_log_probs_as_optax():
    loc, log_scale = jnp.asarray(X[0]), jnp.asarray(X[1] * 0.3)
    key = jax.random.key(1)
    ours, theirs = numerics.multi_normal(loc, log_scale), optax.multi_normal(loc, log_scale)
    a, b = ours.sample((5, 2), key), theirs.sample((5, 2), key)
    assert a.shape == (5, 2, 4)
    np.testing.assert_allclose(a, b, **TOL)
    np.testing.assert_allclose(ours.log_prob(a), theirs.log_prob(b), **TOL)
    np.testing.assert_allclose(ours.log_prob(a[0, 0]), theirs.log_prob(a[0, 0]), **TOL)
    jax.tree.map(lambda p, q: np.testing.assert_array_equal(p, q), ours.params, theirs.params)
    np.testing.assert_array_equal(ours.log_scale, theirs.log_scale)
    # the density itself: independent normals with standard deviations exp(log_scale)
    sd = np.exp(np.float64(X[1]) * 0.3)
    x = np.asarray(a[0, 0], np.float64)
    want = np.sum(-0.5 * ((x - X[0]) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi))
    np.testing.assert_allclose(ours.log_prob(a[0, 0]), want, rtol=1e-5)
    assert compat.multi_normal is numerics.multi_normal
    assert gradtx.numerics is numerics
