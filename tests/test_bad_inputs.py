"""Bad inputs found by trying gradtx as a careless user would: each is refused with a message that says
what, where and what to do instead, or its step is NaN (never a silently wrong number, never a bare JAX
or Python error)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx

PARAMS = {"w": jnp.ones((4, 3))}
FOREIGN = {"v": jnp.ones((3, 3))}


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: gradtx.radam(0.1, threshold=math.nan), ValueError, r"`radam`: `threshold` must be finite"),
        (lambda: gradtx.lamb(0.1, min_norm=math.nan), ValueError, r"`lamb`: `min_norm` must be finite"),
        (
            lambda: gradtx.scale_by_backtracking_linesearch(5, slope_rtol=42),
            ValueError,
            r"`slope_rtol` must be in \[0.0, 1.0\), got 42",
        ),
    ],
    ids=["radam-threshold-nan", "lamb-min_norm-nan", "backtracking-slope_rtol"],
)
def test_refused_at_construction(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _update(tx, grads, params=PARAMS, **extra):
    return tx.update(grads, tx.init(PARAMS), params, **extra)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: _update(gradtx.clip_by_norm(1.0), {"w": jnp.ones((4, 3), jnp.int32)}),
            TypeError,
            r"`clip_by_norm`: the gradient at \['w'\] is int32",
        ),
        (
            lambda: _update(gradtx.accumulate_gradients(gradtx.sgd(0.1), every_k=2), FOREIGN, FOREIGN),
            gradtx.TreeMismatchError,
            r"`accumulate_gradients`: updates and state.accumulator .*only in updates: \['v'\]",
        ),
        (
            lambda: _update(gradtx.galore(0.1, rank=2), FOREIGN, FOREIGN),
            gradtx.TreeMismatchError,
            r"`galore`: updates and state.projector .*only in updates: \['v'\]",
        ),
        (
            lambda: _update(gradtx.adam_gs(0.1), PARAMS, global_step=-1),
            ValueError,
            r"`adam_gs`: `global_step` must be a scalar >= 0, got -1",
        ),
    ],
    ids=["clip_by_norm-int32", "accumulate-foreign-tree", "galore-foreign-tree", "adam_gs-negative-step"],
)
def test_refused_at_the_step(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_adam_gs_takes_tfs_int64_global_step():
    """TF's global step is int64: a step past int32's range is TF's `pow(beta, float(step + 1))`."""
    updates, _ = _update(gradtx.adam_gs(0.1), PARAMS, global_step=2**40)
    # the bias corrections are 1 there: m = 0.1 g, v = 0.001 g^2, so the step is 0.1 * 0.1 / sqrt(0.001)
    np.testing.assert_allclose(updates["w"], -0.1 * 0.1 / math.sqrt(0.001) * np.ones((4, 3)), rtol=1e-5)


@pytest.mark.parametrize("l1", [math.nan, -1.0])
def test_ftrl_with_a_bad_l1_schedule_nans_the_step(l1):
    """`ftrl(0.5, l1=lambda c: nan)` returned `-params` (the params zeroed) before schedules were checked."""
    tx = gradtx.ftrl(0.5, l1=lambda count: jnp.float32(l1) + 0 * count)
    updates, _ = jax.jit(tx.update)(PARAMS, tx.init(PARAMS), PARAMS)
    assert np.isnan(np.asarray(updates["w"])).all()
