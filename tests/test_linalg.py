"""gradtx.linalg against optax's power_iteration, matrix_inverse_pth_root and nnls, and float64 references."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradtx import linalg
from gradtx import optax_compat as compat

optax = pytest.importorskip("optax")

TOL = {"rtol": 1e-6, "atol": 1e-6}


def _spd(n, seed, shift=0.1):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return (a @ a.T / n + shift * np.eye(n)).astype(np.float32)


N = 6
MATS = np.stack([_spd(N, seed, shift) for seed, shift in enumerate((0.1, 1e-3, 1.0, 0.01))])


def test_power_iteration_equals_optax_on_random_spd_matrices_and_trees():
    def tree_mvp(v):  # a diagonal operator over a tree
        return {"a": 3.0 * v["a"], "b": jnp.arange(4.0) * v["b"]}

    tree_v0 = {"a": jnp.ones(3), "b": jnp.ones(4)}

    @jax.jit
    def run(mats):
        out = []
        for fn in (linalg.power_iteration, optax.power_iteration):
            v0 = jnp.ones(N)
            out.append(
                [
                    jax.vmap(fn)(mats),
                    jax.vmap(lambda m, fn=fn, v0=v0: fn(m, v0=v0, num_iters=30, error_tolerance=1e-3))(mats),
                    jax.vmap(lambda m, fn=fn, v0=v0: fn(lambda v: m @ v, v0=v0))(mats),
                    fn(mats[1], key=jax.random.key(3)),
                    fn(tree_mvp, v0=tree_v0),
                ]
            )
        return out

    ours, theirs = run(MATS)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), ours, theirs)
    for m, value, vector in zip(MATS, *ours[0], strict=True):  # the dominant pair, in float64
        w, v = np.linalg.eigh(np.float64(m))
        np.testing.assert_allclose(value, w[-1], rtol=1e-4)
        np.testing.assert_allclose(np.abs(vector), np.abs(v[:, -1]), atol=1e-3)
    np.testing.assert_allclose(ours[-1][0], 3.0, rtol=1e-5)
    assert compat.power_iteration is linalg.power_iteration


def test_matrix_inverse_pth_root_equals_optax_and_the_float64_root():
    ps = (1, 2, 4, 8)

    def each(fn, mats, p, **kwargs):
        return jax.vmap(lambda m: fn(m, p, **kwargs))(mats)

    @jax.jit
    def run(mats):
        out = {}
        out["ours"] = [each(linalg.matrix_inverse_pth_root, mats, p) for p in ps]
        out["optax"] = [each(optax.matrix_inverse_pth_root, mats, p) for p in ps[1::2]]  # 2 and 8
        out["early"] = [
            fn(mats[2], 4, ridge_epsilon=1e-3, num_iters=5)
            for fn in (linalg.matrix_inverse_pth_root, optax.matrix_inverse_pth_root)
        ]
        out["compat3"] = each(compat.matrix_inverse_pth_root, mats, 3)
        out["optax3"] = each(optax.matrix_inverse_pth_root, mats, 3)
        out["exact3"] = each(linalg.matrix_inverse_pth_root, mats, 3, ridge_epsilon=0.0)
        out["one"] = linalg.matrix_inverse_pth_root(jnp.full((1, 1), 4.0), 2, ridge_epsilon=0.0)
        return out

    out = run(MATS)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), out["ours"][1::2], out["optax"])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), *out["early"])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), out["compat3"], out["optax3"])
    for k, m in enumerate(
        MATS
    ):  # against the eigendecomposition in float64 (the default ridge: 1e-6 * max eig)
        w, v = np.linalg.eigh(np.float64(m))
        for j, p in enumerate(ps):
            want = (v * (w + 1e-6 * w[-1]) ** (-1.0 / p)) @ v.T
            np.testing.assert_allclose(out["ours"][j][0][k], want, rtol=2e-3, atol=2e-4)
        # p = 3: gradtx takes cube roots; optax (and optax_compat) take 4th powers in the Newton step
        np.testing.assert_allclose(out["exact3"][0][k], (v * w ** (-1.0 / 3)) @ v.T, rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(out["one"][0], [[0.5]], **TOL)


@pytest.mark.parametrize("p, error", [(0, ValueError), (2.5, TypeError)])
def test_matrix_inverse_pth_root_refuses_a_bad_p(p, error):
    for fn in (linalg.matrix_inverse_pth_root, compat.matrix_inverse_pth_root):
        with pytest.raises(error, match=r"`matrix_inverse_pth_root`: `p` must be"):
            fn(MATS[0], p)
    for fn in (linalg.matrix_inverse_pth_root, compat.matrix_inverse_pth_root):
        with pytest.raises(ValueError, match=r"`matrix` must be square, got shape \(2, 3\)"):
            fn(jnp.ones((2, 3)), 2)


def test_nnls_equals_optax_and_solves_the_problem():
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((12, 5)), jnp.float32)
    bs = [
        jnp.asarray(rng.standard_normal(12), jnp.float32),
        jnp.asarray(rng.standard_normal((12, 3)), jnp.float32),
    ]

    @jax.jit
    def run(a, bs):
        return [
            [fn(a, b, iters) for b in bs for iters in (0, 3, 500)] + [fn(a, bs[0], 20, 4, 50.0)]
            for fn in (linalg.nnls, optax.nnls)
        ]

    ours, theirs = run(a, bs)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, **TOL), ours, theirs)
    x = np.float64(ours[2])  # 500 steps: the KKT conditions of min |Ax - b|, x >= 0
    grad = np.float64(a).T @ (np.float64(a) @ x - np.float64(bs[0]))
    assert np.all(x >= 0) and np.all(grad >= -1e-4) and np.all(np.abs(x * grad) <= 1e-4)
    assert ours[4].shape == (5, 3) and compat.nnls is linalg.nnls


def test_nnls_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"`nnls`: `A` must be a matrix \(M, N\) .* got \(4, 3\) and \(5,\)"):
        linalg.nnls(jnp.ones((4, 3)), jnp.ones(5), 10)


def test_power_iteration_needs_v0_for_a_function():
    with pytest.raises(ValueError, match=r"`power_iteration`: `v0` is required"):
        linalg.power_iteration(functools.partial(jnp.multiply, 2.0))
