"""AddSign / PowerSign against TensorFlow's own kernels, and the sign decays against contrib's ops.

tf.contrib is gone from TF 2, but its kernels are not: `ResourceApplyAddSign` and
`ResourceApplyPowerSign` are what `AddSignOptimizer._apply_dense` /
`PowerSignOptimizer._apply_dense` call. They run eagerly here on resource variables for
20 steps on two variables, with the sign decay of each step computed at `gs = t-1` by an
op-for-op TensorFlow transcription of contrib's `sign_decay.py` (so gradtx's decays are
tested end to end, not fed in). The sparse path of contrib is Python (no kernel): it is
checked here against a TensorFlow transcription of `_apply_sparse` (after the duplicate
summing of `apply_gradients`), and in tests/algorithms/test_addsign.py and test_powersign.py against
float64 references.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import gradtx
from gradtx.schedules import cosine_sign_decay, linear_sign_decay, restart_sign_decay
from tests import helpers

# ----------------------------------------------------------------------- contrib's sign_decay.py, in TF ops


def tf_linear(decay_steps):
    def fn(global_step):
        global_step = tf.minimum(global_step, decay_steps)
        remaining = tf.cast(decay_steps, tf.int32) - tf.cast(global_step, tf.int32)
        return tf.maximum(0.0, tf.cast(remaining, tf.float32) / tf.cast(decay_steps, tf.float32))

    return fn


def tf_cosine(decay_steps, num_periods=0.5, zero_after=None):
    def fn(global_step):
        global_step = tf.minimum(global_step, decay_steps)
        completed = tf.cast(global_step, tf.float32) / tf.cast(decay_steps, tf.float32)
        fraction = 2.0 * num_periods * completed
        decayed = 0.5 * (1.0 + tf.cos(tf.constant(math.pi) * fraction))
        if zero_after is not None:
            decayed = tf.where(tf.greater_equal(fraction, 2 * zero_after), 0.0, decayed)
        return decayed

    return fn


def tf_restart(decay_steps, num_periods=1, zero_after=None):
    def fn(global_step):
        global_step = tf.minimum(global_step, decay_steps)
        num = tf.math.floormod(num_periods * tf.cast(global_step, tf.float32), decay_steps)
        fraction = num / tf.cast(decay_steps, tf.float32)
        decayed = 0.5 * (1.0 + tf.cos(tf.constant(math.pi) * fraction))
        if zero_after is not None:
            tmp = tf.cast(num_periods * global_step, tf.float32) / tf.cast(decay_steps, tf.float32)
            decayed = tf.where(tf.greater_equal(tmp, zero_after), 0.0, decayed)
        return decayed

    return fn


# (id, gradtx schedule, contrib transcription, args); contrib's global_step is an int64 variable
DECAYS = [
    ("linear-7", linear_sign_decay, tf_linear, (7,)),
    ("linear-41", linear_sign_decay, tf_linear, (41,)),
    ("cosine-23", cosine_sign_decay, tf_cosine, (23,)),
    ("cosine-periods-zero-after", cosine_sign_decay, tf_cosine, (13, 1.7, 0.6)),
    ("cosine-int-zero-after", cosine_sign_decay, tf_cosine, (41, 2.0, 1)),
    ("restart-9", restart_sign_decay, tf_restart, (9,)),
    ("restart-int-zero-after", restart_sign_decay, tf_restart, (13, 3, 2)),
    ("restart-fraction", restart_sign_decay, tf_restart, (41, 0.3)),
    ("restart-float", restart_sign_decay, tf_restart, (10, 2.5)),
    ("restart-zero-after-1", restart_sign_decay, tf_restart, (41, 1, 1)),
]
STEPS = range(60)


def _tf_decays(tf_fn, args):
    fn = tf_fn(*args)
    return np.array([np.float32(fn(tf.constant(s, tf.int64))) for s in STEPS], np.float32)


@pytest.mark.parametrize("name, factory, tf_fn, args", DECAYS, ids=[d[0] for d in DECAYS])
def test_sign_decay_equals_contribs_ops_bit_for_bit(name, factory, tf_fn, args):
    expected = _tf_decays(tf_fn, args)
    schedule = factory(*args)
    np.testing.assert_array_equal(np.array([schedule(s) for s in STEPS], np.float32), expected, err_msg=name)
    jitted = jax.jit(schedule)
    np.testing.assert_array_equal(
        np.array([jitted(jnp.int32(s)) for s in STEPS], np.float32), expected, err_msg=f"{name} (jit)"
    )


def test_contribs_restart_zero_after_needs_an_integer_num_periods():
    """contrib multiplies the int64 global step by num_periods for zero_after: TF refuses a float there.
    gradtx computes num_periods * step in float32 instead (the same value for an integer)."""
    with pytest.raises(TypeError, match="Cannot convert 2.0 to EagerTensor of dtype int64"):
        tf_restart(10, 2.0, zero_after=1)(tf.constant(3, tf.int64))
    assert float(restart_sign_decay(10, 2.0, zero_after=1)(3)) == float(_tf_decays(tf_restart, (10, 2, 1))[3])


# --------------------------------------------------------------------------- the kernels


def _f32(x):
    return tf.constant(x, tf.float32)


def _dense_step(kind, var, m, grad, lr, h, beta, decay):
    """`AddSignOptimizer._resource_apply_dense` / `PowerSignOptimizer._resource_apply_dense`."""
    if kind == "addsign":
        tf.raw_ops.ResourceApplyAddSign(
            var=var.handle,
            m=m.handle,
            lr=_f32(lr),
            alpha=_f32(h),
            sign_decay=decay,
            beta=_f32(beta),
            grad=tf.constant(grad),
        )
    else:
        tf.raw_ops.ResourceApplyPowerSign(
            var=var.handle,
            m=m.handle,
            lr=_f32(lr),
            logbase=_f32(math.log(h)),
            sign_decay=decay,
            beta=_f32(beta),
            grad=tf.constant(grad),
        )


def _sparse_step(kind, var, m, grad, lr, h, beta, decay):
    """`Optimizer._apply_sparse_duplicate_indices`, then contrib's `_apply_sparse`, op for op."""
    indices, values = grad
    unique, positions = tf.unique(tf.constant(indices, tf.int32))
    summed = tf.math.unsorted_segment_sum(tf.constant(values), positions, tf.shape(unique)[0])
    slices = tf.IndexedSlices(summed, unique, dense_shape=tf.shape(var, out_type=tf.int32))
    lr_t, beta_t = _f32(lr), _f32(beta)
    m_t = m.assign((m * beta_t) + (tf.convert_to_tensor(slices) * (1 - beta_t)))  # densified, every row
    sign_gm = tf.gather(tf.sign(m_t), unique) * tf.sign(summed)
    if kind == "addsign":
        multiplier = _f32(h) + decay * sign_gm
    else:
        multiplier = tf.pow(_f32(math.e), _f32(math.log(h)) * decay * sign_gm)
    var.scatter_sub(tf.IndexedSlices(lr_t * multiplier * summed, unique))


def tf_trajectory(kind, params, grads_seq, lr, h, beta, tf_decay):
    """The variables after each step and the final `m`; `tf_decay(global_step)` or None (1.0)."""
    variables = [tf.Variable(p) for p in params]
    slots = [tf.Variable(np.zeros_like(p)) for p in params]
    out = []
    for t, grads in enumerate(grads_seq, start=1):
        decay = _f32(1.0) if tf_decay is None else tf.cast(tf_decay(tf.constant(t - 1, tf.int64)), tf.float32)
        for var, m, g in zip(variables, slots, grads, strict=True):
            step = _sparse_step if isinstance(g, tuple) else _dense_step
            step(kind, var, m, g, lr, h, beta, decay)
        out.append([v.numpy() for v in variables])
    return out, [m.numpy() for m in slots]


# (id, kind, lr, alpha or base, beta, decay: (gradtx schedule, contrib transcription, args) or number or None)
CASES = [
    ("addsign-defaults", "addsign", 0.1, 1.0, 0.9, None),
    ("addsign-custom", "addsign", 0.05, 0.7, 0.5, 0.37),
    ("addsign-linear", "addsign", 0.1, 1.0, 0.9, (linear_sign_decay, tf_linear, (16,))),
    ("addsign-cosine", "addsign", 0.1, 1.5, 0.8, (cosine_sign_decay, tf_cosine, (13, 1.7, 0.6))),
    ("addsign-restart", "addsign", 0.1, 1.0, 0.9, (restart_sign_decay, tf_restart, (7, 2))),
    ("addsign-restart-zero-after", "addsign", 0.1, 1.0, 0.9, (restart_sign_decay, tf_restart, (9, 3, 2))),
    ("powersign-defaults", "powersign", 0.1, math.e, 0.9, None),
    ("powersign-custom", "powersign", 0.05, 3.0, 0.5, 0.37),
    ("powersign-linear", "powersign", 0.1, math.e, 0.9, (linear_sign_decay, tf_linear, (16,))),
    ("powersign-cosine", "powersign", 0.1, 2.0, 0.95, (cosine_sign_decay, tf_cosine, (13, 1.7, 0.6))),
    ("powersign-restart", "powersign", 0.1, math.e, 0.9, (restart_sign_decay, tf_restart, (7, 2))),
    ("powersign-big-base", "powersign", 0.01, math.exp(6.0), 0.9, (cosine_sign_decay, tf_cosine, (30,))),
]


def _decays(spec):
    if spec is None:
        return None, None
    if not isinstance(spec, tuple):
        return spec, lambda gs: _f32(spec)
    factory, tf_fn, args = spec
    return factory(*args), tf_fn(*args)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense-kernel", "sparse-transcription"])
@pytest.mark.parametrize("name, kind, lr, h, beta, decay", CASES, ids=[c[0] for c in CASES])
def test_trajectory_matches_tensorflow(name, kind, lr, h, beta, decay, sparse):
    ours, theirs = _decays(decay)
    params, grads = helpers.problem(5, sparse=sparse)
    expected, tf_m = tf_trajectory(kind, params, grads, lr, h, beta, theirs)
    if kind == "addsign":
        tx = gradtx.addsign(lr, alpha=h, beta=beta, sign_decay=ours)
    else:
        tx = gradtx.powersign(lr, base=h, beta=beta, sign_decay=ours)
    actual, state = helpers.run(tx, params, helpers.to_gradtx(grads))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-5, atol=1e-6, msg=f"{name}: params after step {t + 1}")
    helpers.assert_trees_close(gradtx.get_slot(state, "m"), tf_m, rtol=1e-5, atol=1e-6, msg=f"{name}: slot m")


def test_addsign_eager_equals_the_kernel_bit_for_bit():
    """Without jit (no FMA fusion), AddSign's multipliers 0, 1, 2 make both orders of the products exact."""
    params, grads = helpers.problem(6)
    expected, tf_m = tf_trajectory("addsign", params, grads, 0.1, 1.0, 0.9, None)
    actual, state = helpers.run(gradtx.addsign(0.1, 1.0, 0.9, None), params, grads, jit=False)
    for a, e in zip(actual, expected, strict=True):
        helpers.assert_trees_close(a, e, rtol=0, atol=0)
    helpers.assert_trees_close(gradtx.get_slot(state, "m"), tf_m, rtol=0, atol=0)
