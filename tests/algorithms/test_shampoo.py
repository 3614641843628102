"""gradtx/_algorithms/shampoo.py: scale_by_shampoo against a float64 NumPy reference of
spec/TF_SEMANTICS.md (the contract's checks, run locally: test_shampoo_contract.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._algorithms.shampoo import ScaleByShampooState, scale_by_shampoo
from gradtx._algorithms.shampoo_roots import root_iterative, root_svd
from tests import helpers

SHAPES = [(4, 3), (5,), (2, 3, 4)]


# --------------------------------------------------------------------------- the float64 reference


def _power(mat, eps, neg_alpha):
    """(mat + eps I)^neg_alpha of a symmetric PSD matrix, eigenvalues floored at eps (the exact root)."""
    lam, q = np.linalg.eigh(mat + eps * np.eye(len(mat)))
    return (q * np.maximum(lam, eps) ** neg_alpha) @ q.T


def _average(slot, decay, decay_t, rest):
    """(value, new slot); a literal decay of 0 does not write the slot, 1 is a plain sum."""
    if decay == 0:
        return rest, slot
    value = slot + rest if decay == 1 else slot + ((decay_t - 1) * slot + rest)
    return value, value


def reference(
    params,
    grads_seq,
    lr,
    *,
    max_matrix_size=768,
    gbar_decay=0.0,
    gbar_weight=1.0,
    mat_gbar_decay=1.0,
    mat_gbar_weight=1.0,
    svd_interval=1,
    precond_update_interval=1,
    eps=0.1,
    alpha=0.5,
):
    """The spec's Shampoo in float64 (schedules called with t-1); a scalar is a [1] vector. Returns
    (trajectory, slots)."""

    def at(h, t):
        return float(h(t - 1)) if callable(h) else h

    params = [np.asarray(p, np.float64) for p in params]
    slots = []
    for p in params:
        dims = p.shape or (1,)
        slots.append(
            {
                "gbar": np.zeros(p.shape),
                "G": [np.zeros((d, d) if d <= max_matrix_size else d) for d in dims],
                "H": [np.eye(d) for d in dims],
            }
        )
    out = []
    for t, grads in enumerate(grads_seq, start=1):
        for j, g in enumerate(grads):
            s, shape = slots[j], np.shape(g)
            dims = shape or (1,)
            g = np.asarray(g, np.float64).reshape(dims)
            rank = len(dims)
            pg, gbar = _average(
                s["gbar"].reshape(dims), gbar_decay, at(gbar_decay, t), at(gbar_weight, t) * g
            )
            s["gbar"] = gbar.reshape(shape)
            neg_alpha = -at(alpha, t) / rank
            decay_t, weight_t = at(mat_gbar_decay, t), at(mat_gbar_weight, t)
            for i, d in enumerate(dims):
                axes = [a for a in range(rank) if a != i]
                if d <= max_matrix_size:
                    if t % precond_update_interval == 0:
                        rest = (weight_t * precond_update_interval) * np.tensordot(g, g, (axes, axes))
                        value, s["G"][i] = _average(s["G"][i], mat_gbar_decay, decay_t, rest)
                    else:
                        value = s["G"][i]
                    if svd_interval == 1 or t % svd_interval == 0:
                        s["H"][i] = _power(value, at(eps, t), neg_alpha)
                    pg = np.tensordot(pg, s["H"][i], ([0], [0]))
                else:
                    rest = weight_t * np.sum(g * g, axis=tuple(axes))
                    value, s["G"][i] = _average(s["G"][i], mat_gbar_decay, decay_t, rest)
                    pg = np.transpose(pg, [*range(1, rank), 0]) * (value + at(eps, t)) ** neg_alpha
            params[j] = params[j] - lr * pg.reshape(shape)
        out.append([p.copy() for p in params])
    return out, slots


CASES = {
    "svd-root": {},
    "diagonal-fallback": {
        "max_matrix_size": 3
    },  # (4,3): dim 0 diagonal; (5,) diagonal; (2,3,4): dim 2 diagonal
    "all-diagonal": {"max_matrix_size": 0, "svd_interval": 2},
    "intervals": {"svd_interval": 3, "precond_update_interval": 2, "eps": 0.1},
    "gbar-sum": {"gbar_decay": 1.0},
    "gbar-average": {"gbar_decay": 0.7, "gbar_weight": 0.5},
    "mat-gbar-average": {"mat_gbar_decay": 0.9, "mat_gbar_weight": 2.0, "max_matrix_size": 4},
    "mat-gbar-decay-0": {
        "mat_gbar_decay": 0.0,
        "precond_update_interval": 2,
        "eps": 1e-2,
        "max_matrix_size": 3,
    },
    "alpha-1": {"alpha": 1.0, "eps": 0.1},
    "schedules": {
        "gbar_decay": lambda c: 0.5 + 0.01 * c,
        "gbar_weight": lambda c: 1.0 / (1.0 + c),
        "mat_gbar_decay": lambda c: 0.95 + 0.0 * c,
        "mat_gbar_weight": lambda c: 1.0 + 0.1 * c,
        "eps": lambda c: 1e-3 + 0.0 * c,
        "alpha": lambda c: 0.5 + 0.0 * c,
    },
}
LR = 0.1


def _run64(tx, params, grads):
    with jax.enable_x64(True):
        actual, state = helpers.run(
            tx,
            [np.asarray(p, np.float64) for p in params],
            [[np.asarray(g, np.float64) for g in step] for step in grads],
            jit=True,  # the roots' iterations: compiling once beats dispatching them op by op
        )
        assert all(x.dtype == np.float64 for x in actual[-1])
    return actual, state


@pytest.mark.parametrize("name", list(CASES))
def test_float64_matches_the_reference_tightly(name):
    params, grads = helpers.problem(0, shapes=SHAPES)
    expected, slots = reference(params, grads, LR, **CASES[name])
    actual, state = _run64(gradtx.shampoo(LR, **CASES[name]), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"{name}: params after step {t + 1}")
    s = state[0]
    helpers.assert_trees_close(s.gbar, [x["gbar"] for x in slots], rtol=1e-12, atol=1e-12, msg="gbar")
    helpers.assert_trees_close(
        s.mat_gbar, [tuple(x["G"]) for x in slots], rtol=1e-12, atol=1e-12, msg="mat_gbar"
    )


@pytest.mark.parametrize("name", list(CASES))
def test_float32_matches_the_reference(name):
    """float32 against exact arithmetic, rtol = atol = 5e-5.

    The roots come from an SVD of G + eps I, whose small eigenvalues (eps where G is
    rank-deficient) carry an absolute error ~1e-7 |G|; raised to -alpha/r that is a
    relative error ~1e-7 |G| / eps in those directions. With |G| ~ 10..100 and eps = 1e-4
    the 20-step trajectories stay within 2e-5 of exact. Where the root is stale (intervals,
    mat_gbar_decay 0), the new gradient is not in the range of G and the gain is larger, so
    those cases use eps = 0.1 or 1e-2 (at 1e-4 float32 is off by ~1e-3 there, in TF too).
    """
    params, grads = helpers.problem(0, shapes=SHAPES)
    expected, _ = reference(params, grads, LR, **CASES[name])
    actual, state = helpers.run(gradtx.shampoo(LR, **CASES[name]), params, grads, jit=True)
    assert state[0].gbar[0].dtype == jnp.float32
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=5e-5, atol=5e-5, msg=f"{name}: params after step {t + 1}")


@pytest.mark.parametrize(
    "kwargs", [{}, {"max_matrix_size": 3}, {"svd_interval": 2, "eps": 1e-2}, {"alpha": 1.0, "eps": 0.1}]
)
def test_iterative_root_matches_the_exact_root(kwargs):
    params, grads = helpers.problem(1, shapes=SHAPES)
    expected, _ = reference(params, grads, LR, **kwargs)
    actual, _ = _run64(gradtx.shampoo(LR, use_iterative_root=True, **kwargs), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-5, atol=1e-7, msg=f"params after step {t + 1}")
    actual32, _ = helpers.run(gradtx.shampoo(LR, use_iterative_root=True, **kwargs), params, grads, jit=True)
    for a, e in zip(actual32, expected, strict=True):
        helpers.assert_trees_close(a, e, rtol=5e-5, atol=5e-5)


@pytest.mark.parametrize("n, p", [(2, 2), (3, 4), (5, 6), (6, 8), (4, 1)])
def test_schur_newton_root_of_psd_matrices(n, p):
    rng = np.random.default_rng(n * 10 + p)
    a = rng.standard_normal((n, n - 1))
    mat = a @ a.T * 10.0  # rank-deficient: the eps damping decides the smallest eigenvalue
    with jax.enable_x64(True):
        exact = _power(mat, 1e-4, -1.0 / p)
        got = np.asarray(root_iterative(jnp.asarray(mat), 1e-4, -1.0 / p, p))
        svd = np.asarray(root_svd(jnp.asarray(mat), 1e-4, -1.0 / p))
    np.testing.assert_allclose(svd, exact, rtol=1e-9, atol=1e-9 * np.abs(exact).max())
    assert np.linalg.norm(got - exact) <= 1e-6 * np.linalg.norm(exact)


def _schur_newton(mat, eps, p):
    """The coupled iteration as contrib writes it: z, M_0 = z A, X_0 = z^(1/p) I; stop at max|M - I| <=
    1e-6."""
    a = -1.0 / p
    eye = np.eye(len(mat))
    damped = mat + eps * eye
    z = (1 - 1 / a) / (2 * np.linalg.norm(damped))
    m, x, i = damped * z, eye * z ** (-a), 0
    while i < 100 and np.abs(m - eye).max() > 1e-6:
        m_i = (1 - a) * eye + a * m
        m, x, i = np.linalg.matrix_power(m_i, p) @ m, x @ m_i, i + 1
    return x, i


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_schur_newton_follows_contribs_iteration_and_stopping_rule(scale):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 3))
    mat = scale * a @ a.T
    expected, iterations = _schur_newton(mat, 1e-4, 4)
    assert 5 < iterations < 100  # stopped by the tolerance, not the cap
    with jax.enable_x64(True):
        got = np.asarray(root_iterative(jnp.asarray(mat), 1e-4, -0.25, 4))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12 * np.abs(expected).max())
    # one iteration fewer is visibly less accurate: the stopping rule, not a fixed count, decides
    exact = _power(mat, 1e-4, -0.25)
    assert np.linalg.norm(got - exact) <= 1e-6 * np.linalg.norm(exact)


def test_a_scalar_is_a_length_one_vector():
    """contrib fails on rank 0 (it divides by the rank); gradtx uses (G + eps)^-alpha gbar, G = sum of g^2."""
    rng = np.random.default_rng(3)
    grads = [[rng.standard_normal(())] for _ in range(5)]
    with jax.enable_x64(True):
        actual, state = helpers.run(gradtx.shampoo(LR), [np.float64(0.5)], grads)
    expected = 0.5 - LR * np.cumsum(
        [g[0] / np.sqrt(np.sum(np.square(grads[: t + 1])) + 0.1) for t, g in enumerate(grads)]
    )
    np.testing.assert_allclose([a[0] for a in actual], expected, rtol=1e-12)
    assert state[0].mat_gbar[0][0].shape == (1, 1) and state[0].gbar[0].shape == ()


# --------------------------------------------------------------------------- slots


def test_slot_layout_and_names():
    params = {"w": jnp.zeros((4, 3), jnp.bfloat16), "v": jnp.zeros(5), "none": None}
    state = scale_by_shampoo(max_matrix_size=4, svd_interval=2).init(params)
    assert isinstance(state, ScaleByShampooState) and state._fields == ("count", "gbar", "mat_gbar", "mat_h")
    assert [x.shape for x in state.mat_gbar["w"]] == [(4, 4), (3, 3)] and state.mat_gbar["v"][0].shape == (5,)
    np.testing.assert_array_equal(state.mat_h["w"][1], np.eye(3))
    assert state.mat_h["v"] == (None,) and state.mat_gbar["none"] is None
    assert state.gbar["w"].dtype == state.mat_gbar["w"][0].dtype == jnp.float32
    assert scale_by_shampoo().init(params).mat_h["w"] == (None, None)  # svd_interval 1: no H slot (as TF)


def test_first_step_with_svd_interval_uses_the_identity_root():
    g = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2)), jnp.float32)
    tx = scale_by_shampoo(svd_interval=2, gbar_weight=2.0)
    update = jax.jit(tx.update)
    u, state = update(g, tx.init(g))
    np.testing.assert_array_equal(u, 2 * g)
    u, state = update(g, state)
    assert not np.allclose(u, 2 * g)
    assert not np.allclose(state.mat_h[0], np.eye(3))


@pytest.mark.parametrize("gbar_decay, expected", [(0.0, 0.0), (1.0, 3.0), (0.5, 1.75)])
def test_gbar_slot(gbar_decay, expected):
    tx = scale_by_shampoo(gbar_decay=gbar_decay)
    state = tx.init(jnp.zeros(2))
    for _ in range(3):
        _, state = tx.update(jnp.ones(2), state)
    np.testing.assert_allclose(state.gbar, [expected] * 2)  # decay 0: contrib never writes the slot


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"max_matrix_size": -1}, ValueError, r"`scale_by_shampoo`: `max_matrix_size` must be >= 0, got -1"),
        ({"max_matrix_size": 7.5}, TypeError, r"`max_matrix_size` must be an integer"),
        ({"gbar_decay": 1.5}, ValueError, r"`gbar_decay` must be in \[0.0, 1.0\]"),
        ({"gbar_weight": -1.0}, ValueError, r"`gbar_weight` must be >= 0"),
        ({"mat_gbar_decay": -0.1}, ValueError, r"`mat_gbar_decay` must be in \[0.0, 1.0\]"),
        ({"mat_gbar_weight": -2.0}, ValueError, r"`mat_gbar_weight` must be >= 0"),
        ({"svd_interval": 0}, ValueError, r"`svd_interval` must be >= 1, got 0"),
        ({"precond_update_interval": 2.0}, TypeError, r"`precond_update_interval` must be an integer"),
        ({"eps": -1e-4}, ValueError, r"`eps` must be >= 0"),
        ({"alpha": -0.5}, ValueError, r"`alpha` must be >= 0"),
        ({"use_iterative_root": 1}, TypeError, r"`use_iterative_root` must be True or False"),
        ({"use_iterative_root": True, "alpha": 0.0}, ValueError, r"`alpha` must be > 0"),
        (
            {"use_iterative_root": True, "alpha": lambda c: 0.5},
            TypeError,
            r"`alpha` must be a number or a scalar array",
        ),
        ({"gbar_weight": "1"}, TypeError, r"`gbar_weight` must be a number, a scalar array or a schedule"),
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        scale_by_shampoo(**kwargs)


def test_errors_name_the_alias():
    with pytest.raises(ValueError, match=r"`shampoo`: `svd_interval` must be >= 1"):
        gradtx.shampoo(svd_interval=0)


def test_iterative_root_needs_an_integer_root_order():
    tx = scale_by_shampoo(use_iterative_root=True, alpha=0.3)
    with pytest.raises(
        ValueError, match=r"rank / `alpha` must be a positive integer .* rank 2 with alpha=0.3"
    ):
        tx.init({"w": jnp.zeros((3, 4))})
    tx.init({"w": jnp.zeros((1, 1))})  # no matrix root needed: size-1 dims use a plain power
    scale_by_shampoo(use_iterative_root=True, alpha=0.3, max_matrix_size=1).init(
        {"w": jnp.zeros((2, 9))}
    )  # diagonal
