"""gradtx.projections (gradtx/projections/) against optax.projections, and each projection's defining
properties: the result lies in the set, a point already inside stays, projecting twice changes nothing."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as compat
from gradtx import projections as P

RNG = np.random.default_rng(0)


def _tree(scale=2.0):
    return {
        "w": jnp.asarray(scale * RNG.standard_normal((3, 4)), jnp.float32),
        "b": jnp.asarray(scale * RNG.standard_normal(5), jnp.float32),
    }


X, A = _tree(), _tree(1.0)
LOWER = jax.tree.map(lambda x: jnp.full_like(x, -0.5), X)
UPPER = jax.tree.map(lambda x: jnp.full_like(x, 0.7), X)
B = 0.3

OP = optax.projections
T = gradtx.tree
ZEROS = jax.tree.map(jnp.zeros_like, X)


def _parallel_to_a(y):
    return T.norm(T.sub(y, T.scale(T.vdot(y, A) / T.vdot(A, A), A))) < 1e-5


# name -> (projection of a tree, its optax counterpart, is `y` in the set (up to rounding)?)
CASES = {
    "non_negative": (P.projection_non_negative, OP.projection_non_negative, lambda y: T.min(y) >= 0),
    "box": (lambda t: P.projection_box(t, LOWER, UPPER), lambda t: OP.projection_box(t, LOWER, UPPER),
            lambda y: (T.min(y) >= -0.5) & (T.max(y) <= 0.7)),
    # optax's hypercube fails on a tree of more than one leaf (its lower bound 0 is not a tree): its box
    "hypercube": (lambda t: P.projection_hypercube(t, UPPER), lambda t: OP.projection_box(t, ZEROS, UPPER),
                  lambda y: (T.min(y) >= 0) & (T.max(y) <= 0.7)),
    "simplex": (lambda t: P.projection_simplex(t, 2.0), lambda t: OP.projection_simplex(t, 2.0),
                lambda y: (T.min(y) >= 0) & (jnp.abs(T.sum(y) - 2.0) < 1e-5)),
    "l1_sphere": (lambda t: P.projection_l1_sphere(t, 2.0), lambda t: OP.projection_l1_sphere(t, 2.0),
                  lambda y: jnp.abs(T.norm(y, ord=1) - 2.0) < 1e-5),
    "l1_ball": (lambda t: P.projection_l1_ball(t, 2.0), lambda t: OP.projection_l1_ball(t, 2.0),
                lambda y: T.norm(y, ord=1) <= 2.0 + 1e-5),
    "l2_sphere": (lambda t: P.projection_l2_sphere(t, 1.5), lambda t: OP.projection_l2_sphere(t, 1.5),
                  lambda y: jnp.abs(T.norm(y) - 1.5) < 1e-5),
    "l2_ball": (lambda t: P.projection_l2_ball(t, 1.5), lambda t: OP.projection_l2_ball(t, 1.5),
                lambda y: T.norm(y) <= 1.5 + 1e-5),
    "linf_ball": (lambda t: P.projection_linf_ball(t, 0.5), lambda t: OP.projection_linf_ball(t, 0.5),
                  lambda y: T.norm(y, ord="inf") <= 0.5),
    "vector": (lambda t: P.projection_vector(t, A), lambda t: OP.projection_vector(t, A), _parallel_to_a),
    "hyperplane": (lambda t: P.projection_hyperplane(t, A, B), lambda t: OP.projection_hyperplane(t, A, B),
                   lambda y: jnp.abs(T.vdot(A, y) - B) < 1e-4),
    "halfspace": (lambda t: P.projection_halfspace(t, A, B), lambda t: OP.projection_halfspace(t, A, B),
                  lambda y: T.vdot(A, y) <= B + 1e-4),
}  # fmt: skip
INSIDE = {  # a point of each set that is not on its boundary everywhere
    "non_negative": jax.tree.map(jnp.abs, X),
    "box": jax.tree.map(lambda x: 0.1 * jnp.tanh(x), X),
    "hypercube": jax.tree.map(lambda x: 0.3 + 0.1 * jnp.tanh(x), X),
    "l1_ball": gradtx.tree.scale(1.0 / gradtx.tree.norm(X, ord=1), X),
    "l2_ball": gradtx.tree.scale(1.0 / gradtx.tree.norm(X), X),
    "linf_ball": jax.tree.map(lambda x: 0.4 * jnp.tanh(x), X),
    "halfspace": gradtx.tree.add_scale(X, (B - 1.0 - gradtx.tree.vdot(A, X)) / gradtx.tree.vdot(A, A), A),
}


def _all():
    out = {}
    for name, (ours, theirs, member) in CASES.items():
        y = ours(X)
        out[name] = {
            "ours": y,
            "theirs": theirs(X),
            "in_set": member(y),
            "twice": ours(y),
            "inside": ours(INSIDE[name]) if name in INSIDE else None,
        }
    return out


@functools.lru_cache(maxsize=None)
def _results():
    """Every projection, optax's and the property checks, in one jitted program (compiled once)."""
    return jax.jit(_all)()


@pytest.mark.parametrize("name", CASES)
def test_projection_equals_optax_lies_in_the_set_and_is_idempotent(name):
    r = _results()[name]
    assert not np.allclose(r["ours"]["w"], X["w"]), f"{name}: X should lie outside the set"
    for a, e in zip(jax.tree.leaves(r["ours"]), jax.tree.leaves(r["theirs"]), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6, err_msg=name)
    assert bool(r["in_set"]), name
    for a, e in zip(jax.tree.leaves(r["twice"]), jax.tree.leaves(r["ours"]), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, err_msg=f"{name}: projected twice")
    if r["inside"] is not None:
        for a, e in zip(jax.tree.leaves(r["inside"]), jax.tree.leaves(INSIDE[name]), strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6, err_msg=f"{name}: a point inside moved")


def test_the_projection_is_the_nearest_point_among_others_of_the_set():
    """Against 200 random points of the l1 ball: none is nearer to X than its projection (a float64 check of
    optimality, independent of optax)."""
    y = np.concatenate([np.ravel(v) for v in jax.tree.leaves(P.projection_l1_ball(X, 2.0))]).astype(
        np.float64
    )
    x = np.concatenate([np.ravel(v) for v in jax.tree.leaves(X)]).astype(np.float64)
    others = RNG.standard_normal((200, x.size)) * (RNG.random((200, x.size)) < 0.2) + 1e-3
    others *= (2.0 * RNG.random((200, 1))) / np.abs(others).sum(axis=1, keepdims=True)
    assert np.min(np.sum((others - x) ** 2, axis=1)) >= np.sum((y - x) ** 2) - 1e-6


def test_simplex_jacobian_equals_optaxs_and_compat_is_gradtxs():
    v = jnp.asarray(RNG.standard_normal(6), jnp.float32)
    ours, theirs = jax.jit(
        lambda v: (
            jax.jacobian(P.projection_simplex)(v),
            jax.jacobian(optax.projections.projection_simplex)(v),
        )
    )(v)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    assert compat.projections.projection_simplex is P.projection_simplex
    public = sorted(n for n in dir(optax.projections) if n.startswith("projection_"))
    assert sorted(compat.projections.__all__) == public


def test_a_number_bound_applies_to_every_leaf():
    out = P.projection_hypercube(X, 0.25)
    assert gradtx.tree.max(out) == 0.25 and gradtx.tree.min(out) == 0.0
    np.testing.assert_allclose(
        P.projection_box(X, -0.5, 0.7)["w"], optax.projections.projection_box(X["w"], -0.5, 0.7)
    )


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: P.projection_simplex(X, 0.0), ValueError,
         r"`projection_simplex`: `scale` must be > 0, got 0.0\."),
        (lambda: P.projection_l1_ball(X, -1.0), ValueError,
         r"`projection_l1_ball`: `scale` must be > 0, got -1.0\."),
        (lambda: P.projection_l2_ball(X, "1"), TypeError, r"`projection_l2_ball`: `scale` must be a number"),
        (lambda: P.projection_linf_ball(X, -0.5), ValueError,
         r"`projection_linf_ball`: `scale` must be >= 0, got -0.5\."),
        (lambda: P.projection_box(X, {"w": 0.0}, 1.0), ValueError,
         r"`projection_box`: a bound must be a number, an array, or a tree with the structure of `tree`"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()
