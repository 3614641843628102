"""tf.contrib.opt optimizers against TensorFlow: the kernels that still ship, and contrib's Python rules
rebuilt from tf.compat.v1 ops where the kernel is a plain TF1 one (AdamW/MomentumW, LARS, AdamGS)."""

import numpy as np
import pytest
import tensorflow as tf

import gradtx
from tests import helpers
from tests.parity.tf_oracle import compare, problem, v1

raw = tf.raw_ops


def _eager(apply_step, slot_names, params, grads_seq, initial=0.0):
    """Run `apply_step(var, slots, grad, t)` (TF eager, resource variables) for each step."""
    out = []
    variables = [tf.Variable(p) for p in params]
    slots = [{n: tf.Variable(np.full_like(p, initial)) for n in slot_names} for p in params]
    for t, grads in enumerate(grads_seq, start=1):
        for var, s, g in zip(variables, slots, grads, strict=True):
            apply_step(var, s, tf.constant(g), t)
        out.append([v.numpy() for v in variables])
    return out, [{n: s[n].numpy() for n in slot_names} for s in slots]


def _check(actual, expected, atol=1e-6):
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-5, atol=atol, msg=f"params after step {t + 1}")


@pytest.mark.parametrize(
    "lr, b1, b2, eps", [(0.001, 0.9, 0.999, 1e-8), (0.05, 0.5, 0.8, 1e-3)], ids=["defaults", "custom"]
)
def test_adamax_matches_apply_adamax(lr, b1, b2, eps):
    params, grads = problem(0)

    def step(var, s, g, t):  # contrib's beta1_power: beta1 multiplied into a float32 once per step
        raw.ResourceApplyAdaMax(
            var=var.handle,
            m=s["m"].handle,
            v=s["v"].handle,
            beta1_power=np.float32(b1) ** t,
            lr=np.float32(lr),
            beta1=np.float32(b1),
            beta2=np.float32(b2),
            epsilon=np.float32(eps),
            grad=g,
        )

    expected, slots = _eager(step, ["m", "v"], params, grads)
    actual, state = helpers.run(gradtx.adamax(lr, b1, b2, eps), params, grads)
    _check(actual, expected, atol=5e-6)
    helpers.assert_trees_close(gradtx.get_slot(state, "v"), [s["v"] for s in slots], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "lr, b1, b2, eps", [(0.001, 0.9, 0.999, 1e-8), (0.05, 0.5, 0.8, 1e-3)], ids=["defaults", "custom"]
)
def test_nadam_matches_apply_adam_with_nesterov(lr, b1, b2, eps):
    params, grads = problem(1)

    def step(var, s, g, t):
        raw.ResourceApplyAdam(
            var=var.handle,
            m=s["m"].handle,
            v=s["v"].handle,
            beta1_power=np.float32(b1) ** t,
            beta2_power=np.float32(b2) ** t,
            lr=np.float32(lr),
            beta1=np.float32(b1),
            beta2=np.float32(b2),
            epsilon=np.float32(eps),
            grad=g,
            use_nesterov=True,
        )

    expected, slots = _eager(step, ["m", "v"], params, grads)
    actual, state = helpers.run(gradtx.nadam(lr, b1, b2, eps), params, grads)
    _check(actual, expected, atol=5e-6)
    helpers.assert_trees_close(gradtx.get_slot(state, "m"), [s["m"] for s in slots], rtol=1e-5, atol=1e-6)


def test_adam_gs_matches_apply_adam_with_powers_of_the_global_step():
    params, grads = problem(2)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8

    def step(var, s, g, t):
        gs = tf.cast(tf.constant(t - 1) + 1, tf.float32)  # AdamGS: cast(global_step + 1, float32)
        raw.ResourceApplyAdam(
            var=var.handle,
            m=s["m"].handle,
            v=s["v"].handle,
            beta1_power=tf.pow(np.float32(b1), gs),
            beta2_power=tf.pow(np.float32(b2), gs),
            lr=np.float32(lr),
            beta1=np.float32(b1),
            beta2=np.float32(b2),
            epsilon=np.float32(eps),
            grad=g,
        )

    expected, _ = _eager(step, ["m", "v"], params, grads)
    actual, _ = helpers.run(
        gradtx.adam_gs(lr, b1, b2, eps),
        params,
        grads,
        extra_args_seq=[{"global_step": t} for t in range(len(grads))],
    )
    _check(actual, expected, atol=5e-6)


class _DecoupledDecay:
    """contrib's DecoupledWeightDecayExtension around a TF1 optimizer: decay each variable (its gradient's
    rows when sparse), then, under a control dependency, the optimizer's own update."""

    def __init__(self, opt, weight_decay):
        self._opt, self._wd = opt, weight_decay

    def apply_gradients(self, grads_and_vars, global_step=None):
        decays = []
        for g, var in grads_and_vars:
            if isinstance(g, tf.IndexedSlices):
                rows, _ = tf.unique(g.indices)
                decays.append(v1.scatter_add(var, rows, -self._wd * tf.gather(var, rows)))
            else:
                decays.append(var.assign_sub(self._wd * var))
        with tf.control_dependencies(decays):
            return self._opt.apply_gradients(grads_and_vars, global_step=global_step)

    def get_slot(self, var, name):
        return self._opt.get_slot(var, name)

    def get_slot_names(self):
        return self._opt.get_slot_names()


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_adamw_matches_tf1_adam_after_the_decoupled_decay(sparse):
    compare(
        lambda gs: _DecoupledDecay(v1.train.AdamOptimizer(0.01), 0.05),
        gradtx.adamw(0.01, weight_decay=0.05),
        sparse=sparse,
        atol=5e-6,
    )


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("nesterov", [False, True], ids=["plain", "nesterov"])
def test_momentumw_matches_tf1_momentum_after_the_decoupled_decay(sparse, nesterov):
    compare(
        lambda gs: _DecoupledDecay(v1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=nesterov), 0.05),
        gradtx.momentumw(0.05, 0.9, 0.05, nesterov=nesterov),
        sparse=sparse,
    )


@pytest.mark.parametrize("nesterov", [False, True], ids=["plain", "nesterov"])
def test_lars_matches_apply_momentum_with_contribs_trust_ratio(nesterov):
    params, grads = problem(3)
    lr, mu, wd, eeta, eps = 0.5, 0.9, 1e-3, 0.01, 1e-4

    def step(var, s, g, t):
        w_norm, g_norm = tf.norm(var), tf.norm(g)
        trust = tf.where(
            w_norm > 0, tf.where(g_norm > 0, eeta * w_norm / (g_norm + wd * w_norm + eps), 1.0), 1.0
        )
        raw.ResourceApplyMomentum(
            var=var.handle,
            accum=s["momentum"].handle,
            lr=lr * trust,
            grad=g,
            momentum=np.float32(mu),
            use_nesterov=nesterov,
        )

    expected, slots = _eager(step, ["momentum"], params, grads)
    actual, state = helpers.run(gradtx.lars(lr, mu, wd, eeta, eps, nesterov=nesterov), params, grads)
    _check(actual, expected)
    helpers.assert_trees_close(
        gradtx.get_slot(state, "momentum"), [s["momentum"] for s in slots], rtol=1e-5, atol=1e-6
    )


def test_lars_sparse_is_tf1_sparse_momentum_with_the_plain_rate():
    compare(
        lambda gs: v1.train.MomentumOptimizer(0.05, 0.9),
        gradtx.lars(0.05, 0.9),
        sparse=True,
        slots=["momentum"],
    )


def test_lazy_adam_dense_is_tf1_adam():
    compare(lambda gs: v1.train.AdamOptimizer(0.01), gradtx.lazy_adam(0.01), atol=5e-6, slots=["m", "v"])


def test_reg_adagrad_without_slot_updates_matches_the_kernel_flag():
    params, grads = problem(4)

    def step(var, s, g, t):
        raw.ResourceApplyAdagrad(
            var=var.handle, accum=s["accumulator"].handle, lr=np.float32(0.1), grad=g, update_slots=t % 2 == 1
        )

    expected, _ = _eager(step, ["accumulator"], params, grads, initial=0.1)
    tx = gradtx.reg_adagrad(0.1, initial_accumulator_value=0.1)
    actual, _ = helpers.run(
        tx, params, grads, extra_args_seq=[{"update_slots": t % 2 == 0} for t in range(len(grads))]
    )
    _check(actual, expected)
