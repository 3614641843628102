"""Run a TF1 optimizer (graph mode, `tf.compat.v1`) and gradtx side by side on the same gradients."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

import gradtx
from tests import helpers

v1 = tf.compat.v1

problem, to_gradtx = helpers.problem, helpers.to_gradtx


def trajectory(
    make_optimizer: Callable[[Any], Any],
    params: Sequence[np.ndarray],
    grads_seq: Sequence[Sequence[Any]],
    *,
    slot_names: Sequence[str] = (),
) -> tuple[list[list[np.ndarray]], dict[str, list[np.ndarray]]]:
    """Apply `make_optimizer(global_step)` to float32 variables for `len(grads_seq)` steps.

    A dense gradient is fed as is. A sparse one, `(indices, values)`, is produced the way a
    model produces it: as the gradient of `sum(tf.gather(var, indices) * values)`, an
    `IndexedSlices` (TF sums duplicate indices first). `apply_gradients` increments the
    global step, as a TF1 training loop does.

    Returns:
      The variable values after each step, and the final value of each requested slot per
      variable.
    """
    graph = tf.Graph()
    with graph.as_default():
        variables = [v1.Variable(np.asarray(p, np.float32), dtype=tf.float32) for p in params]
        global_step = v1.train.get_or_create_global_step()
        feeds, grads = [], []
        for var, p, g in zip(variables, params, grads_seq[0], strict=True):
            if isinstance(g, tuple):
                idx = v1.placeholder(tf.int32, [None])
                val = v1.placeholder(tf.float32, [None, *np.shape(p)[1:]])
                (grad,) = v1.gradients(tf.reduce_sum(tf.gather(var, idx) * val), [var])
                assert isinstance(grad, tf.IndexedSlices)
                grads.append(grad)
                feeds.append((idx, val))
            else:
                ph = v1.placeholder(tf.float32, np.shape(p))
                grads.append(ph)
                feeds.append(ph)
        opt = make_optimizer(global_step)
        train = opt.apply_gradients(list(zip(grads, variables, strict=True)), global_step=global_step)
        slots = {name: [opt.get_slot(v, name) for v in variables] for name in slot_names}
        missing = [n for n, vs in slots.items() if any(s is None for s in vs)]
        assert not missing, f"TF has no slot named {missing}; it has {opt.get_slot_names()}"
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            out = []
            for step_grads in grads_seq:
                fd = {}
                for feed, g in zip(feeds, step_grads, strict=True):
                    if isinstance(feed, tuple):
                        fd[feed[0]], fd[feed[1]] = np.asarray(g[0], np.int32), np.asarray(g[1], np.float32)
                    else:
                        fd[feed] = np.asarray(g, np.float32)
                sess.run(train, feed_dict=fd)
                out.append(sess.run(variables))
            slot_values = {name: sess.run(vs) for name, vs in slots.items()}
    return out, slot_values


def compare(
    make_tf: Callable[[Any], Any],
    tx: gradtx.GradientTransformation,
    *,
    sparse: bool = False,
    slots: Sequence[str] = (),
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
    scale: float = 1.0,
) -> None:
    """Assert that `tx` follows the TF optimizer for STEPS steps, then that their slots agree.

    Slots are looked up by TF's name with `gradtx.get_slot`.
    """
    params, grads = problem(seed, sparse=sparse, scale=scale)
    expected, tf_slots = trajectory(make_tf, params, grads, slot_names=slots)
    actual, state = helpers.run(tx, params, to_gradtx(grads))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=rtol, atol=atol, msg=f"params after step {t + 1}")
    for name in slots:
        got = gradtx.get_slot(state, name)
        helpers.assert_trees_close(got, tf_slots[name], rtol=rtol, atol=atol, msg=f"slot {name}")
