"""`gradtx.optax_compat.MultiSteps` beside `optax.MultiSteps`: the same numbers, state and API."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx.optax_compat as compat

optax = pytest.importorskip("optax")


def _paths(tree):
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _run(lib, every_k, dtype, jit, skip=None):
    tx = lib.MultiSteps(lib.adam(1e-2), every_k_schedule=every_k, should_skip_update_fn=skip)
    params = {"w": jnp.linspace(-1.0, 1.0, 6, dtype=dtype).reshape(2, 3), "b": jnp.ones(3, dtype)}
    state = tx.init(params)
    update = jax.jit(tx.update) if jit else tx.update
    trace = []
    for t in range(20 if jit else 8):  # eager: 8 steps (an eager step runs optax's `cond` op by op)
        g = jax.tree.map(lambda p, t=t: (p * (t % 3 + 1) - 0.5).astype(dtype), params)
        if skip is not None and t == 5:
            g = jax.tree.map(lambda x: x.at[0].set(jnp.nan), g)
        u, state = update(g, state, params)
        params = lib.apply_updates(params, u)
        trace.append(bool(tx.has_updated(state)))
    return params, state, trace


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("every_k", [3, lambda step: jnp.where(step < 2, 2, 4)], ids=["int", "schedule"])
def test_multi_steps_equal_optax(every_k, dtype, jit):
    p_ours, s_ours, h_ours = _run(compat, every_k, dtype, jit)
    p_theirs, s_theirs, h_theirs = _run(optax, every_k, dtype, jit)
    assert h_ours == h_theirs
    assert type(s_ours).__name__ == "MultiStepsState" and s_ours._fields == s_theirs._fields
    assert _paths(s_ours) == _paths(s_theirs)
    for a, b in zip(jax.tree.leaves((p_ours, s_ours)), jax.tree.leaves((p_theirs, s_theirs)), strict=True):
        assert jnp.asarray(a).dtype == jnp.asarray(b).dtype
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=1e-6, atol=1e-6)


def test_multi_steps_skips_what_optax_skips():
    p_ours, s_ours, h_ours = _run(compat, 2, jnp.float32, True, skip=compat.skip_not_finite)
    p_theirs, s_theirs, h_theirs = _run(optax, 2, jnp.float32, True, skip=optax.skip_not_finite)
    assert h_ours == h_theirs
    for a, b in zip(jax.tree.leaves(p_ours), jax.tree.leaves(p_theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert int(s_ours.skip_state["num_not_finite"]) == int(s_theirs.skip_state["num_not_finite"])


def test_gradient_transformation_chains():
    tx = compat.MultiSteps(compat.sgd(0.1), 2)
    chained = compat.chain(compat.clip_by_global_norm(1.0), tx.gradient_transformation())
    params = jnp.zeros(2)
    state = chained.init(params)
    for _ in range(2):
        u, state = chained.update(jnp.ones(2), state, params)
    assert tx.inner_opt is not None and u.shape == (2,) and bool(jnp.all(u < 0))
