"""gradtx/_algorithms/apollo.py: APOLLO against pytorch-optimizer's `APOLLO` (tools/references/apollo.py),
replaying the random projections it drew; its arguments, its draws and errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


def _replayed_draws(case):
    """`draw` giving, at each renewal, the (r, n) matrix the reference drew (its second draw of two)."""
    gap = case.kwargs["update_proj_gap"]
    steps = len(case.grads)
    renewals = [t for t in range(1, steps + 1) if t == 1 or t % gap == 0]
    assert len(case.draws) == 2 * len(renewals)
    used = jnp.stack([jnp.asarray(d) for d in case.draws[1::2]])
    index = jnp.asarray(np.maximum(np.searchsorted(renewals, np.arange(steps + 1), side="right") - 1, 0))

    def draw(path, t, shape, dtype):
        assert jax.tree_util.keystr(path) == "['matrix']" and shape == used.shape[1:]
        return used[index[t]].astype(dtype)

    return draw


@pytest.mark.parametrize("case", _references.cases("apollo"), ids=repr)
def test_apollo_equals_pytorch_optimizer(case):
    if not case.draws:
        _references.check_case(case)
        return
    args = gradtx.registry.translate_kwargs("APOLLO", case.kwargs)
    _references.check_case(case, tx=gradtx.apollo(**args, draw=_replayed_draws(case)))


def test_apollo_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("apollo", "apollo")
    with pytest.raises(ValueError, match="`projection_type` must be one of"):
        gradtx.get("APOLLO", rank=2, projection_type="left")


def test_the_default_draws_depend_on_the_seed_the_leaf_and_the_step():
    params = {"a": jnp.ones((6, 3)), "b": jnp.ones((6, 3)), "c": jnp.ones((2, 5))}

    def projections(seed, steps):
        tx = gradtx.scale_by_apollo(rank=2, update_proj_gap=2, seed=seed)
        state = tx.init(params)
        out = []
        for _ in range(steps):
            _, state = tx.update(params, state)
            out.append(state.projection)
        return out

    p = projections(0, 3)
    assert p[0]["a"].shape == (2, 3) and p[0]["c"].shape == (2, 2)  # (r, n) for m >= n, (m, r) else
    assert not np.allclose(p[0]["a"], p[0]["b"])  # one matrix per leaf
    np.testing.assert_array_equal(p[1]["a"], p[2]["a"])  # renewed at step 2, kept at step 3
    assert not np.allclose(p[0]["a"], p[1]["a"])
    assert not np.allclose(p[0]["a"], projections(1, 1)[0]["a"])
    np.testing.assert_array_equal(p[0]["a"], projections(0, 1)[0]["a"])  # deterministic


def test_a_wide_matrix_is_projected_from_the_left():
    g = jnp.asarray(np.random.default_rng(0).standard_normal((3, 6)), jnp.float32)
    p = jnp.asarray(np.random.default_rng(1).standard_normal((3, 2)), jnp.float32)
    tx = gradtx.scale_by_apollo(rank=2, correct_bias=False, draw=lambda path, t, shape, dtype: p)
    u, state = tx.update(g, tx.init(g))
    proj = p / np.sqrt(2)
    r = proj.T @ g  # (r, n)
    n = 0.1 * r / (np.sqrt(0.001) * np.abs(r) + 1e-6)  # Adam's first step
    s = r * np.linalg.norm(n) / (np.linalg.norm(r) + 1e-8)
    np.testing.assert_allclose(state.exp_avg, 0.1 * r, rtol=1e-6)
    np.testing.assert_allclose(u, proj @ s, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"rank": 0}, ValueError, r"`apollo`: `rank` must be >= 1"),
        ({"update_proj_gap": 0}, ValueError, r"`apollo`: `update_proj_gap` must be >= 1"),
        ({"scale_type": "row"}, ValueError, r"`apollo`: `scale_type` must be one of"),
        ({"b2": 1.0}, ValueError, r"`apollo`: `b2` must be in \[0.0, 1.0\)"),
        ({"draw": 3}, TypeError, r"`apollo`: `draw`"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.apollo(0.1, **kwargs)
