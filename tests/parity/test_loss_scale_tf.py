"""loss_scaled against TF1's `tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer` (graph mode).

Both sides minimize `sum(w * x_t)` on the same targets, some of them inf or NaN: TF through
`MixedPrecisionLossScaleOptimizer(opt, loss_scale).minimize` (which scales the loss,
unscales the gradients, skips non-finite steps and updates the scale), gradtx by
differentiating `scale_loss(loss, state)` and stepping `loss_scaled(tx, ...)`. Compared after
every step: the params, the loss scale, the good-step count, and TF's global step against the
inner optimizer's count (neither advances at a skipped step).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import gradtx
from tests.parity.tf_oracle import v1

STEPS = 20
BAD = {2: np.inf, 3: np.nan, 7: -np.inf, 12: np.nan, 13: np.nan, 14: np.inf}


def _targets(bad=BAD):
    x = np.random.default_rng(3).standard_normal((STEPS, 3)).astype(np.float32)
    for t, value in bad.items():
        x[t, 1] = value
    return x


def _tf_run(make_opt, make_loss_scale, xs):
    """TF's params, loss scale, good steps and global step after each step (the loss scale made in the
    graph: a DynamicLossScale holds variables)."""
    graph = tf.Graph()
    with graph.as_default():
        w = v1.Variable(np.zeros(3, np.float32))
        x = v1.placeholder(tf.float32, [3])
        global_step = v1.train.get_or_create_global_step()
        opt = v1.mixed_precision.MixedPrecisionLossScaleOptimizer(make_opt(), make_loss_scale())
        train = opt.minimize(tf.reduce_sum(w * x), global_step=global_step)
        scale = opt._loss_scale()
        good = getattr(opt._loss_scale, "_num_good_steps", tf.constant(0, tf.int64))
        out = []
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            for x_t in xs:
                sess.run(train, {x: x_t})
                out.append(sess.run([w, scale, good, global_step]))
    return [np.stack(column) for column in zip(*out, strict=True)]


def _gradtx_run(tx, xs):
    """gradtx's params, loss scale, good steps and inner count after each step (one jitted `lax.scan`)."""

    def step(carry, x_t):
        w, state = carry
        grads = jax.grad(lambda w: gradtx.scale_loss(jnp.sum(w * x_t), state))(w)
        updates, state = tx.update(grads, state, w)
        w = gradtx.apply_updates(w, updates)
        counts = [  # the inner optimizer's count (SGD keeps none: -1)
            leaf
            for path, leaf in jax.tree_util.tree_leaves_with_path(state.inner_state)
            if "count" in jax.tree_util.keystr(path)
        ]
        count = counts[0] if counts else jnp.asarray(-1, jnp.int32)
        return (w, state), (w, state.loss_scale, state.good_steps, count)

    w = jnp.zeros(3)
    out = jax.jit(lambda xs: jax.lax.scan(step, (w, tx.init(w)), xs)[1])(jnp.asarray(xs))
    return [np.asarray(a) for a in out]


CASES = {
    "sgd_dynamic": (
        lambda: v1.train.GradientDescentOptimizer(0.1),
        lambda: gradtx.sgd(0.1),
        lambda: v1.mixed_precision.DynamicLossScale(
            initial_loss_scale=2.0**4, increment_period=3, multiplier=2.0
        ),
        {"initial_loss_scale": 2.0**4, "increment_period": 3, "multiplier": 2.0},
    ),
    "adam_dynamic_odd_multiplier": (
        lambda: v1.train.AdamOptimizer(0.01),
        lambda: gradtx.adam(0.01),
        lambda: v1.mixed_precision.DynamicLossScale(
            initial_loss_scale=5.0, increment_period=2, multiplier=3.0
        ),
        {"initial_loss_scale": 5.0, "increment_period": 2, "multiplier": 3.0},
    ),
    "adam_dynamic_defaults": (
        lambda: v1.train.AdamOptimizer(0.01),
        lambda: gradtx.adam(0.01),
        lambda: "dynamic",
        {},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_dynamic_loss_scale_matches_tf(case):
    make_tf, make_ours, tf_scale, kwargs = CASES[case]
    xs = _targets()
    w_tf, scale_tf, good_tf, step_tf = _tf_run(make_tf, tf_scale, xs)
    w, scale, good, count = _gradtx_run(gradtx.loss_scaled(make_ours(), "dynamic", **kwargs), xs)
    np.testing.assert_allclose(w, w_tf, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(scale, scale_tf)
    np.testing.assert_array_equal(good, good_tf)
    if count[0] >= 0:
        np.testing.assert_array_equal(count, step_tf)
    assert step_tf[-1] == STEPS - len(BAD)  # TF skipped exactly the bad steps
    assert len(set(scale_tf.tolist())) > 1  # the scale changed


def test_fixed_loss_scale_matches_tf_and_applies_a_nan():
    xs = _targets(bad={4: np.nan})
    w_tf, scale_tf, _, step_tf = _tf_run(lambda: v1.train.GradientDescentOptimizer(0.1), lambda: 128, xs[:6])
    w, scale, good, count = _gradtx_run(gradtx.loss_scaled(gradtx.sgd(0.1), 128), xs[:6])
    np.testing.assert_allclose(w, w_tf, rtol=1e-6, atol=1e-6)  # NaN where TF has NaN
    assert np.isnan(w_tf[4, 1]) and step_tf[-1] == 6
    np.testing.assert_array_equal(scale, scale_tf)
    np.testing.assert_array_equal(good, 0)
