"""MovingAverageOptimizer and VariableClippingOptimizer semantics against TensorFlow ops (tf.compat.v1).

contrib is gone, but both wrappers are thin: ExponentialMovingAverage.apply after
apply_gradients (num_updates = the incremented global step), and tf.clip_by_norm of the
updated variable along the given axes (on the gradient's rows for IndexedSlices).
"""

import numpy as np
import pytest
import tensorflow as tf

import gradtx
from tests import helpers
from tests.parity.tf_oracle import problem, to_gradtx, v1


class _MovingAverage:
    def __init__(self, opt, decay, num_updates, global_step):
        self._opt = opt
        self.ema = v1.train.ExponentialMovingAverage(decay, num_updates=global_step if num_updates else None)

    def apply_gradients(self, grads_and_vars, global_step=None):
        train = self._opt.apply_gradients(grads_and_vars, global_step=global_step)
        with tf.control_dependencies([train]):
            return self.ema.apply([v for _, v in grads_and_vars])

    def get_slot(self, var, name):
        return self.ema.average(var)


def _tf_run(make, params, grads_seq):
    graph = tf.Graph()
    with graph.as_default():
        variables = [v1.Variable(p) for p in params]
        gs = v1.train.get_or_create_global_step()
        phs = [v1.placeholder(tf.float32, p.shape) for p in params]
        opt = make(gs)
        train = opt.apply_gradients(list(zip(phs, variables, strict=True)), global_step=gs)
        averages = [opt.get_slot(v, "average") for v in variables]
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            out = []
            for grads in grads_seq:
                sess.run(train, {ph: g for ph, g in zip(phs, grads, strict=True)})
                out.append((sess.run(variables), sess.run(averages)))
    return out


@pytest.mark.parametrize("num_updates", [False, True], ids=["fixed-decay", "num-updates"])
def test_moving_average_params_and_averages_match_tf(num_updates):
    params, grads = problem(0)
    expected = _tf_run(
        lambda gs: _MovingAverage(v1.train.MomentumOptimizer(0.05, 0.9), 0.8, num_updates, gs), params, grads
    )
    tx = gradtx.moving_average(gradtx.momentum(0.05, 0.9), 0.8, num_updates=num_updates)
    actual, state = helpers.run(tx, params, grads)
    for t, (a, (e, _)) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-5, atol=1e-6, msg=f"params after step {t + 1}")
    helpers.assert_trees_close(
        gradtx.averaged_params(state), expected[-1][1], rtol=1e-5, atol=1e-6, msg="averages"
    )


class _VariableClipping:
    def __init__(self, opt, max_norm, dims):
        self._opt, self._max_norm, self._dims = opt, max_norm, dims

    def apply_gradients(self, grads_and_vars, global_step=None):
        train = self._opt.apply_gradients(grads_and_vars, global_step=global_step)
        clips = []
        with tf.control_dependencies([train]):
            for g, var in grads_and_vars:
                axes = self._dims.get(var.op.name)
                if axes is None:
                    continue
                if isinstance(g, tf.IndexedSlices):
                    rows, _ = tf.unique(g.indices)
                    subset = tf.gather(var, rows)
                    clips.append(
                        v1.scatter_sub(var, rows, subset - tf.clip_by_norm(subset, self._max_norm, axes))
                    )
                else:
                    value = var.read_value()
                    clips.append(var.assign_sub(value - tf.clip_by_norm(value, self._max_norm, axes)))
        return tf.group(train, *clips)

    def get_slot(self, var, name):
        return self._opt.get_slot(var, name)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_clip_variables_matches_tf_clip_by_norm_after_the_step(sparse):
    from tests.parity.tf_oracle import trajectory

    params, grads = problem(1, sparse=sparse, scale=3.0)
    params = [p * 2 for p in params]
    names = {}

    def make(gs):
        graph_vars = v1.global_variables()
        names["table"] = graph_vars[0].op.name
        return _VariableClipping(v1.train.GradientDescentOptimizer(0.5), 1.5, {names["table"]: [1]})

    expected, _ = trajectory(make, params, grads)
    tx = gradtx.chain(gradtx.sgd(0.5), gradtx.clip_variables(1.5, {"0": [1]}))
    actual, _ = helpers.run(tx, params, to_gradtx(grads))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-5, atol=1e-6, msg=f"params after step {t + 1}")
    assert np.all(np.linalg.norm(actual[-1][0], axis=1) <= 1.5 + 1e-5)
