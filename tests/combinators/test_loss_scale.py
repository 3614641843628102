"""gradtx/combinators/_loss_scale.py: loss_scaled (TF1's MixedPrecisionLossScaleOptimizer), scale_loss.

Without TF: a float64 transcription of TF's `DynamicLossScale.update` and `FixedLossScale`
(tensorflow/python/training/experimental/loss_scale.py) around SGD, stepped on the gradients
of `scale_loss(loss)` with overflowing steps; the compositions with `accumulate_gradients`
and with `parallel.cross_shard` on 8 devices. TF itself: tests/parity/test_loss_scale_tf.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.parallel import _util

LR = 0.1
BAD = {3: np.inf, 4: np.nan, 9: -np.inf, 10: np.nan, 11: np.inf, 12: np.nan, 13: np.nan}
"""Steps whose gradient has a non-finite entry (the value put there)."""
STEPS = 24


def _targets(steps=STEPS, bad=BAD):
    """Per step, the targets `x` of the loss `sum(w * x)` (its gradient); non-finite at the bad steps."""
    x = np.random.default_rng(0).standard_normal((steps, 3))
    for t, value in bad.items():
        x[t, 1] = value
    return x


def _tf_reference(x, *, fixed=None, initial=2.0**4, period=3, multiplier=2.0):
    """TF's loss scale around SGD in float64: per step (scale used, good_steps, params after)."""
    scale, good, w = (float(fixed) if fixed else initial), 0, np.zeros(x.shape[1])
    out = []
    for g in x:
        used = scale
        with np.errstate(over="ignore", invalid="ignore"):  # the scaled gradient is float32: it may overflow
            scaled = np.float64(np.float32(used) * g.astype(np.float32))
        grad = scaled * (1.0 / used)  # compute_gradients: the scaled loss's gradient, unscaled
        finite = bool(np.all(np.isfinite(grad)))
        if fixed or finite:
            w = w - LR * grad
        if not fixed:
            if finite:
                if good + 1 >= period:
                    if scale * multiplier <= float(np.finfo(np.float32).max):  # TF's variable is float32
                        scale = scale * multiplier
                    good = 0
                else:
                    good += 1
            else:
                scale, good = max(scale / multiplier, 1.0), 0
        out.append((used, scale, good, w.copy()))
    return out


def _run(tx, x):
    """Each step differentiates `scale_loss(sum(w * x_t), state)`; one `lax.scan`, jitted."""

    def step(carry, x_t):
        w, state = carry
        grads = jax.grad(lambda w: gradtx.scale_loss(jnp.sum(w * x_t), state))(w)
        updates, state = tx.update(grads, state, w)
        w = gradtx.apply_updates(w, updates)
        return (w, state), (w, state.loss_scale, state.good_steps)

    w = jnp.zeros(x.shape[1])
    return jax.jit(lambda x: jax.lax.scan(step, (w, tx.init(w)), x)[1])(jnp.asarray(x, jnp.float32))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_loss_scale": 2.0**4, "increment_period": 3},
        {"initial_loss_scale": 2.0**126, "increment_period": 2, "multiplier": 4.0},  # grows to inf: kept
        {"initial_loss_scale": 3.0, "increment_period": 5, "multiplier": 3.0},  # 1 / 3 rounds
    ],
    ids=["halves_to_the_floor", "overflowing_scale", "inexact_reciprocal"],
)
def test_dynamic_loss_scale_follows_tf_rules_in_float64(kwargs):
    x = _targets()
    ref = _tf_reference(
        x,
        initial=kwargs["initial_loss_scale"],
        period=kwargs["increment_period"],
        multiplier=kwargs.get("multiplier", 2.0),
    )
    params, scales, good = map(np.asarray, _run(gradtx.loss_scaled(gradtx.sgd(LR), **kwargs), x))
    np.testing.assert_array_equal(scales, [r[1] for r in ref])  # powers of the multiplier: exact
    np.testing.assert_array_equal(good, [r[2] for r in ref])
    np.testing.assert_allclose(params, [r[3] for r in ref], rtol=1e-6, atol=1e-6)
    skipped = [t for t in range(STEPS) if t > 0 and np.array_equal(params[t], params[t - 1])]
    assert skipped == sorted(BAD)  # the bad steps, and only they, left the params as they were


def test_the_float64_reference_exercises_every_rule():
    """What the comparisons above see: halvings to the floor of 1, increments, an increment refused at inf."""
    floor = [r[1] for r in _tf_reference(_targets())]
    assert floor[2:5] == [32.0, 16.0, 8.0] and min(floor) == 1.0
    huge = [r[1] for r in _tf_reference(_targets(), initial=2.0**126, period=2, multiplier=4.0)]
    assert max(huge) == 2.0**126 and huge[1] == 2.0**126  # 2**128 overflows float32: not assigned


def test_fixed_loss_scale_applies_every_step_as_tf():
    """TF's FixedLossScale never skips: a NaN gradient reaches the params."""
    x = _targets(steps=6, bad={4: np.nan})
    ref = _tf_reference(x, fixed=128.0)
    params, scales, good = map(np.asarray, _run(gradtx.loss_scaled(gradtx.sgd(LR), 128.0), x))
    np.testing.assert_allclose(params[:4], [r[3] for r in ref[:4]], rtol=1e-6, atol=1e-6)
    assert np.isnan(params[4, 1]) and np.all(scales == 128.0) and np.all(good == 0)


def test_accumulate_gradients_composes_both_ways():
    """`loss_scaled(accumulate_gradients(sgd, 2))` drops a bad micro-batch and halves at once;
    `accumulate_gradients(loss_scaled(sgd), 2)` skips the bad mean; one jitted program."""
    x = _targets(steps=8, bad={2: np.nan})
    outer = gradtx.loss_scaled(gradtx.accumulate_gradients(gradtx.sgd(LR), 2), initial_loss_scale=8.0)
    inner = gradtx.accumulate_gradients(gradtx.loss_scaled(gradtx.sgd(LR), initial_loss_scale=8.0), 2)

    def run(tx, state_of):
        def step(carry, x_t):
            w, state = carry
            grads = jax.grad(lambda w: gradtx.scale_loss(jnp.sum(w * x_t), state))(w)
            updates, state = tx.update(grads, state, w)
            w = gradtx.apply_updates(w, updates)
            return (w, state), (w, state_of(state).loss_scale)

        w = jnp.zeros(3)
        return jax.lax.scan(step, (w, tx.init(w)), jnp.asarray(x, jnp.float32))[1]

    (w_outer, s_outer), (w_inner, s_inner) = jax.jit(
        lambda: (run(outer, lambda s: s), run(inner, lambda s: s.inner_state))
    )()
    x32 = x.astype(np.float32)
    # outer: micro-batches 0,1 -> step; 2 (NaN) dropped, scale 4; 3,4 -> step; 5,6 -> step
    expected_outer = [-LR * (x32[0] + x32[1]) / 2]
    expected_outer.append(expected_outer[-1] - LR * (x32[3] + x32[4]) / 2)
    expected_outer.append(expected_outer[-1] - LR * (x32[5] + x32[6]) / 2)
    np.testing.assert_allclose(np.asarray(w_outer)[[1, 4, 6]], expected_outer, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(s_outer, [8, 8, 4, 4, 4, 4, 4, 4])
    # inner: the mean of 2 and 3 is NaN -> skipped at step 3, scale 4 from then on
    expected_inner = [-LR * (x32[0] + x32[1]) / 2]
    expected_inner.append(expected_inner[-1] - LR * (x32[4] + x32[5]) / 2)
    expected_at_1_3_5 = [expected_inner[0], expected_inner[0], expected_inner[1]]  # 3 skipped
    np.testing.assert_allclose(np.asarray(w_inner)[[1, 3, 5]], expected_at_1_3_5, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(s_inner, [8, 8, 8, 4, 4, 4, 4, 4])


@pytest.mark.parametrize("mode", _util.MODES)
def test_cross_shard_replicas_agree_on_a_nan_of_one_replica(mode):
    """An inf on replica 3 at step 1: every replica skips that step and halves its scale; the others are the
    single-device steps on the mean gradient, on every replica alike."""
    tx = gradtx.loss_scaled(
        gradtx.parallel.cross_shard(gradtx.adam(0.1), _util.AXIS), initial_loss_scale=4.0, increment_period=2
    )
    data = np.random.default_rng(1).standard_normal((4, _util.N, 3)).astype(np.float32)
    data[1, 3, 0] = np.inf
    params, (scales, good) = _util.run(
        tx,
        jnp.zeros(3),
        jnp.asarray(data),
        mode=mode,
        grad_fn=lambda w, d: d,  # the scaled gradient below
        extra_fn=None,
        observe=lambda s: (s.loss_scale, s.good_steps),
    )
    np.testing.assert_array_equal(scales, np.tile([4.0, 2.0, 2.0, 4.0], (_util.N, 1)))
    np.testing.assert_array_equal(good, np.tile([1, 0, 1, 0], (_util.N, 1)))
    np.testing.assert_array_equal(params[:, 1], params[:, 0])  # the step with the inf moved no replica
    assert np.all(params == params[:1])  # replicas in sync
    single = gradtx.loss_scaled(gradtx.adam(0.1), initial_loss_scale=4.0, increment_period=2)
    state, w = single.init(jnp.zeros(3)), jnp.zeros(3)
    for t in (0, 1, 2):
        u, state = single.update(jnp.asarray(data[t].mean(0)), state, w)
        w = gradtx.apply_updates(w, u)
    np.testing.assert_allclose(params[0, 2], w, rtol=1e-6, atol=1e-6)


def test_float16_gradients_are_unscaled_in_float32():
    """A float16 gradient of a loss scaled by 2**25 is unscaled in float32: 1 / 2**25 is below float16's
    smallest number (it would round to 0 and zero every update)."""
    tx = gradtx.loss_scaled(gradtx.sgd(1.0), 2.0**25)
    g = jnp.asarray([3.0, 1024.0], jnp.float16)
    u, state = tx.update(g, tx.init(jnp.zeros(2, jnp.float16)))
    np.testing.assert_array_equal(u, (-g.astype(np.float32) / 2**25).astype(np.float16))
    assert u.dtype == jnp.float16 and float(u[1]) == -(2.0**-15)
    assert state.loss_scale.dtype == jnp.float32


def test_scale_loss_needs_exactly_one_loss_scale_state():
    with pytest.raises(
        ValueError, match=r"`scale_loss`: `state` must hold exactly one `LossScaleState`.* found 0"
    ):
        gradtx.scale_loss(1.0, gradtx.sgd(0.1).init(jnp.zeros(1)))
    two = gradtx.chain(gradtx.loss_scaled(gradtx.sgd(0.1)), gradtx.loss_scaled(gradtx.sgd(0.1)))
    with pytest.raises(ValueError, match=r"found 2"):
        gradtx.scale_loss(1.0, two.init(jnp.zeros(1)))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"tx": 1}, TypeError, r"`tx` must be a gradient transformation"),
        ({"loss_scale": "static"}, ValueError, r"`loss_scale` must be one of 'dynamic'; got 'static'"),
        ({"loss_scale": 0.5}, ValueError, r"`loss_scale` must be >= 1, got 0.5"),
        ({"loss_scale": True}, TypeError, r"`loss_scale` must be 'dynamic' or a Python number"),
        ({"loss_scale": float("inf")}, ValueError, r"`loss_scale` must be finite"),
        ({"initial_loss_scale": 0.0}, ValueError, r"`initial_loss_scale` must be > 0, got 0.0"),
        ({"increment_period": 0}, ValueError, r"`increment_period` must be >= 1, got 0"),
        ({"increment_period": 2.0}, TypeError, r"`increment_period` must be an integer"),
        ({"multiplier": 0.5}, ValueError, r"`multiplier` must be in \[1.0, inf\), got 0.5"),
        ({"multiplier": float("nan")}, ValueError, r"`multiplier` must be finite"),
    ],
)
def test_loss_scaled_refuses_bad_arguments(kwargs, error, match):
    kwargs = {"tx": gradtx.sgd(0.1), **kwargs}
    with pytest.raises(error, match=rf"`loss_scaled`: {match}"):
        gradtx.loss_scaled(**kwargs)


def test_the_registry_builds_it_from_tf_names():
    tx = gradtx.get("MixedPrecisionLossScaleOptimizer", opt=gradtx.sgd(0.1), loss_scale=8.0)
    u, _ = tx.update(jnp.full(2, 8.0), tx.init(jnp.zeros(2)))
    np.testing.assert_allclose(u, [-0.1, -0.1], rtol=1e-6)
