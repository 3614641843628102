"""optimize_loss's composition against TensorFlow: multipliers, then global-norm clipping, then the optimizer.

tf.contrib.layers.optimize_loss is gone from TF 2, so the TF side is its body written with
tf.compat.v1 ops (compute_gradients, _multiply_gradients, clip_by_global_norm,
apply_gradients), in graph mode, on a real model: the same order the seed documents.
"""

import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import gradtx
from tests import helpers

v1 = tf.compat.v1


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], np.float32) + 0.3).astype(np.float32)
    params = {"w": rng.standard_normal(4).astype(np.float32), "b": np.zeros((), np.float32)}
    return x, y, params


def _tf_run(x, y, params, make_opt, multipliers, clip, steps, decay=False):
    graph = tf.Graph()
    with graph.as_default():
        w = v1.Variable(params["w"], name="w")
        b = v1.Variable(params["b"], name="b")
        gs = v1.train.get_or_create_global_step()
        loss = tf.reduce_mean((tf.linalg.matvec(tf.constant(x), w) + b - tf.constant(y)) ** 2)
        lr = v1.train.exponential_decay(0.05, gs, 5, 0.5, staircase=True) if decay else 0.05
        opt = make_opt(lr)
        grads_and_vars = opt.compute_gradients(loss, [w, b])
        grads_and_vars = [(g * multipliers.get(v.op.name, 1.0), v) for g, v in grads_and_vars]
        norm = tf.linalg.global_norm([g for g, _ in grads_and_vars])
        if clip is not None:
            clipped, _ = tf.clip_by_global_norm([g for g, _ in grads_and_vars], clip)
            grads_and_vars = list(zip(clipped, [v for _, v in grads_and_vars], strict=True))
        train = opt.apply_gradients(grads_and_vars, global_step=gs)
        out = []
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            for _ in range(steps):
                loss_value, norm_value, _ = sess.run([loss, norm, train])
                out.append((sess.run(w), sess.run(b), loss_value, norm_value))
    return out


@pytest.mark.parametrize(
    "name, make_tf",
    [
        ("Adam", lambda lr: v1.train.AdamOptimizer(lr)),
        ("Momentum", lambda lr: v1.train.MomentumOptimizer(lr, 0.9)),
        ("RMSProp", lambda lr: v1.train.RMSPropOptimizer(lr)),
        ("Ftrl", lambda lr: v1.train.FtrlOptimizer(lr)),
    ],
)
@pytest.mark.parametrize("decay", [False, True], ids=["constant-lr", "decayed-lr"])
def test_multipliers_then_clip_then_optimizer_match_tf(name, make_tf, decay):
    x, y, params = _data()
    multipliers = {"w": 0.5}
    expected = _tf_run(x, y, params, make_tf, multipliers, clip=2.0, steps=15, decay=decay)
    optimizer = {
        "Adam": "Adam",
        "RMSProp": "RMSProp",
        "Ftrl": "Ftrl",
        "Momentum": lambda lr: gradtx.momentum(lr, 0.9),
    }[name]
    decay_fn = gradtx.schedules.exponential_decay  # decayed lr = 0.05 * 0.5 ** floor(step / 5)
    trainer = gradtx.optimize_loss(
        lambda p, x, y: jnp.mean((x @ p["w"] + p["b"] - y) ** 2),
        optimizer,
        learning_rate=0.05,
        learning_rate_decay_fn=(lambda lr, step: decay_fn(lr, 5, 0.5, staircase=True)(step))
        if decay
        else None,
        clip_gradients=2.0,
        gradient_multipliers=multipliers,
    )
    state = trainer.init({k: jnp.asarray(v) for k, v in params.items()})
    step = __import__("jax").jit(trainer.step)
    for t, (w, b, loss, norm) in enumerate(expected):
        state, metrics = step(state, x, y)
        helpers.assert_trees_close(state.params, {"w": w, "b": b}, rtol=1e-5, atol=5e-6, msg=f"step {t + 1}")
        np.testing.assert_allclose(metrics["loss"], loss, rtol=1e-5)
        np.testing.assert_allclose(metrics["global_gradient_norm"], norm, rtol=1e-5)
