"""tf.contrib.opt optimizers rebuilt as TF1 graph-mode optimizers on the kernels TF 2.21 still ships.

contrib is gone from TF 2, but these optimizers were thin Python classes around kernels that
remain (`ResourceApplyAdaMax`, `ResourceApplyAddSign`, `ResourceApplyPowerSign`,
`ResourceApplyAdam(use_nesterov=True)`, `ResourceApplyMomentum`). Each class here keeps its
contrib original's default `name`, slots and non-slot variables (what a checkpoint holds)
and its dense update; sparse paths are not needed by the checkpoint tests.
"""

from __future__ import annotations

import math

import tensorflow as tf

v1 = tf.compat.v1
raw = tf.raw_ops


def _cast(x, like):
    return tf.cast(x, like.dtype.base_dtype)


class AdaMaxOptimizer(v1.train.AdamOptimizer):
    """contrib's AdaMax: an AdamOptimizer (so `beta1_power` and `beta2_power` exist) on ApplyAdaMax."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, name="AdaMax"):
        super().__init__(learning_rate, beta1, beta2, epsilon, False, name)

    def _resource_apply_dense(self, grad, var):
        beta1_power, _ = self._get_beta_accumulators()
        return raw.ResourceApplyAdaMax(
            var=var.handle,
            m=self.get_slot(var, "m").handle,
            v=self.get_slot(var, "v").handle,
            beta1_power=_cast(beta1_power, grad),
            lr=_cast(self._lr_t, grad),
            beta1=_cast(self._beta1_t, grad),
            beta2=_cast(self._beta2_t, grad),
            epsilon=_cast(self._epsilon_t, grad),
            grad=grad,
        )


class NadamOptimizer(v1.train.AdamOptimizer):
    """contrib's Nadam: AdamOptimizer (its default name "Adam") with the Nesterov kernel."""

    def _resource_apply_dense(self, grad, var):
        beta1_power, beta2_power = self._get_beta_accumulators()
        return raw.ResourceApplyAdam(
            var=var.handle,
            m=self.get_slot(var, "m").handle,
            v=self.get_slot(var, "v").handle,
            beta1_power=_cast(beta1_power, grad),
            beta2_power=_cast(beta2_power, grad),
            lr=_cast(self._lr_t, grad),
            beta1=_cast(self._beta1_t, grad),
            beta2=_cast(self._beta2_t, grad),
            epsilon=_cast(self._epsilon_t, grad),
            grad=grad,
            use_nesterov=True,
        )


class _SignOptimizer(v1.train.Optimizer):
    """AddSign / PowerSign: one slot `m`, no sign decay (1.0)."""

    def __init__(self, learning_rate, beta, name):
        super().__init__(False, name)
        self._lr, self._beta = learning_rate, beta

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "m", self._name)


class AddSignOptimizer(_SignOptimizer):
    def __init__(self, learning_rate=0.1, alpha=1.0, beta=0.9, name="AddSignOptimizer"):
        super().__init__(learning_rate, beta, name)
        self._alpha = alpha

    def _resource_apply_dense(self, grad, var):
        return raw.ResourceApplyAddSign(
            var=var.handle,
            m=self.get_slot(var, "m").handle,
            lr=_cast(self._lr, grad),
            alpha=_cast(self._alpha, grad),
            sign_decay=_cast(1.0, grad),
            beta=_cast(self._beta, grad),
            grad=grad,
        )


class PowerSignOptimizer(_SignOptimizer):
    def __init__(self, learning_rate=0.1, base=math.e, beta=0.9, name="PowerSignOptimizer"):
        super().__init__(learning_rate, beta, name)
        self._logbase = math.log(base)

    def _resource_apply_dense(self, grad, var):
        return raw.ResourceApplyPowerSign(
            var=var.handle,
            m=self.get_slot(var, "m").handle,
            lr=_cast(self._lr, grad),
            logbase=_cast(self._logbase, grad),
            sign_decay=_cast(1.0, grad),
            beta=_cast(self._beta, grad),
            grad=grad,
        )


class LARSOptimizer(v1.train.Optimizer):
    """contrib's LARS: a trust ratio per variable, then ApplyMomentum; the slot `momentum`."""

    def __init__(self, learning_rate, momentum=0.9, weight_decay=1e-4, eeta=0.001, epsilon=0.0):
        super().__init__(False, "LARSOptimizer")
        self._lr, self._mu, self._wd, self._eeta, self._eps = (
            learning_rate,
            momentum,
            weight_decay,
            eeta,
            epsilon,
        )

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _resource_apply_dense(self, grad, var):
        w_norm, g_norm = tf.norm(var), tf.norm(grad)
        trust = tf.where(
            w_norm > 0,
            tf.where(g_norm > 0, self._eeta * w_norm / (g_norm + self._wd * w_norm + self._eps), 1.0),
            1.0,
        )
        return raw.ResourceApplyMomentum(
            var=var.handle,
            accum=self.get_slot(var, "momentum").handle,
            lr=self._lr * trust,
            grad=grad,
            momentum=_cast(self._mu, grad),
            use_nesterov=False,
        )


class DecoupledWeightDecay:
    """contrib's DecoupledWeightDecayExtension (AdamW, MomentumW): `var -= wd * var`, then the base update."""

    def __init__(self, opt, weight_decay):
        self._opt, self._wd = opt, weight_decay

    def apply_gradients(self, grads_and_vars, global_step=None):
        decays = [var.assign_sub(self._wd * var) for _, var in grads_and_vars]
        with tf.control_dependencies(decays):
            return self._opt.apply_gradients(grads_and_vars, global_step=global_step)

    def get_slot(self, var, name):
        return self._opt.get_slot(var, name)

    def get_slot_names(self):
        return self._opt.get_slot_names()


class MovingAverageOptimizer:
    """contrib's MovingAverageOptimizer: ExponentialMovingAverage.apply after the update, with
    `num_updates` the (incremented) global step; the averages are the slot "average" here."""

    def __init__(self, opt, average_decay, global_step):
        self._opt = opt
        self.ema = v1.train.ExponentialMovingAverage(average_decay, num_updates=global_step)

    def apply_gradients(self, grads_and_vars, global_step=None):
        train = self._opt.apply_gradients(grads_and_vars, global_step=global_step)
        with tf.control_dependencies([train]):
            return self.ema.apply([v for _, v in grads_and_vars])

    def get_slot(self, var, name):
        return self.ema.average(var) if name == "average" else self._opt.get_slot(var, name)

    def get_slot_names(self):
        return [*self._opt.get_slot_names(), "average"]
