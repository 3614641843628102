"""gradtx/combinators/_scale.py: scale, scale_by_schedule, scale_by_learning_rate."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers


def test_scale_multiplies_every_leaf():
    tx = gradtx.scale(0.5)
    out, state = tx.update({"a": jnp.array([2.0, -4.0]), "b": jnp.array(6.0)}, tx.init(None))
    helpers.assert_trees_close(out, {"a": np.array([1.0, -2.0]), "b": np.array(3.0)}, rtol=0, atol=0)
    assert state == gradtx.EmptyState()


def test_scale_by_learning_rate_flips_the_sign_only_when_asked():
    g = jnp.array([1.0, -2.0])
    lr = np.float32(0.1)
    np.testing.assert_array_equal(gradtx.scale_by_learning_rate(0.1).update(g, ())[0], [-lr, 2 * lr])
    np.testing.assert_array_equal(
        gradtx.scale_by_learning_rate(0.1, flip_sign=False).update(g, ())[0], [lr, -2 * lr]
    )


def test_schedules_see_the_count_of_completed_steps():
    """Inside step t a schedule sees count = t-1 (TF's global_step before its increment)."""
    seen = []
    tx = gradtx.scale_by_learning_rate(lambda count: (seen.append(count), 1.0 + count)[1])
    del seen[:]  # construction traced it once, abstractly, to check that it gives a scalar
    state = tx.init(None)
    out = []
    for _ in range(3):
        u, state = tx.update(jnp.ones(1), state)
        out.append(float(u[0]))
    assert out == [-1.0, -2.0, -3.0]
    assert [int(c) for c in seen] == [0, 1, 2]
    assert int(state.count) == 3


def test_scale_by_schedule_and_scale_with_a_schedule_agree():
    fn = lambda count: 0.5**count  # noqa: E731
    a, b = gradtx.scale_by_schedule(fn), gradtx.scale(fn)
    sa, sb = a.init(None), b.init(None)
    for _ in range(4):
        ua, sa = a.update(jnp.ones(2), sa)
        ub, sb = b.update(jnp.ones(2), sb)
        np.testing.assert_array_equal(ua, ub)
    np.testing.assert_allclose(ua, [0.125, 0.125])


def test_count_saturates_instead_of_wrapping():
    tx = gradtx.scale_by_schedule(lambda count: 1.0)
    state = gradtx.ScaleByScheduleState(count=jnp.asarray(jnp.iinfo(jnp.int32).max, jnp.int32))
    _, state = tx.update(jnp.ones(1), state)
    assert int(state.count) == jnp.iinfo(jnp.int32).max


def test_bf16_updates_stay_bf16_with_a_float32_schedule():
    tx = gradtx.scale_by_learning_rate(lambda count: jnp.float32(0.1))
    u, _ = jax.jit(tx.update)(jnp.ones(2, jnp.bfloat16), tx.init(None))
    assert u.dtype == jnp.bfloat16


def test_scale_errors():
    with pytest.raises(TypeError, match=r"`scale`: `step_size` must be a number"):
        gradtx.scale("big")
    with pytest.raises(TypeError, match=r"`scale_by_schedule`: `step_size_fn` must be callable, got 0.1"):
        gradtx.scale_by_schedule(0.1)
    with pytest.raises(ValueError, match=r"`scale_by_learning_rate`: `learning_rate` must be >= 0, got -0.5"):
        gradtx.scale_by_learning_rate(-0.5)
    with pytest.raises(TypeError, match=r"`scale_by_learning_rate`: `flip_sign` must be True or False"):
        gradtx.scale_by_learning_rate(0.1, flip_sign="yes")
