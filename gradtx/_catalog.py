"""The built-in catalogue: every factory of gradtx registered with its TF names, example and sparse rule.

`gradtx.registry` is the mechanism; the package imports this module right after it, so the
registry is complete once `gradtx` is imported. Each entry's `example` builds a working
instance; the contract suite runs over all of them and the README's catalogue table is
generated from them.
"""

from __future__ import annotations

import math

import jax

from gradtx import _tree, combinators, optimizers, parallel, transforms
from gradtx.registry import Entry, names, register

_TF1 = "tf.compat.v1.train"


def _optimizer(name, factory, aliases, example, reference, sparse="rows", extra_args=None):
    register(
        Entry(
            name,
            factory,
            "optimizer",
            aliases=aliases,
            example=example,
            reference=reference,
            sparse=sparse,
            extra_args=extra_args,
        )
    )


def _transform(name, factory, example=None, sparse="rows", extra_args=None):
    register(Entry(name, factory, "transform", example=example or {}, sparse=sparse, extra_args=extra_args))


def _wrapper(name, factory, example, sparse="rows"):
    register(Entry(name, factory, "wrapper", example=example, sparse=sparse))


def _global_step(step: int) -> dict:
    """AdamGS's extra argument: TF's global step as read during the step (t - 1)."""
    return {"global_step": step}


def _lars_learning_rate(count):
    """An example LARS rate: a decaying schedule (a constant rate keeps LARS oscillating near the optimum)."""
    return 1.0 * 0.99**count


def _custom_sgd_slots(param):
    """`per_leaf` example (RETURNN's CustomGradientDescentOptimizer): no slots."""
    del param
    return {}


def _custom_sgd_apply(grad, param, slots, count, learning_rate):
    """`per_leaf` example: the step to subtract is `learning_rate * grad`."""
    del param, count
    return learning_rate * grad, slots


def _halve(grads, params):
    """An example `transform_gradients` function: halve every gradient (row-sparse ones in their values)."""
    del params
    return jax.tree.map(
        lambda g: g.with_values(g.values / 2) if _tree.is_row_sparse(g) else g / 2,
        grads,
        is_leaf=_tree.is_row_sparse,
    )


def _by_rank(params):
    """An example `partition` labelling: matrices and vectors/scalars."""
    return jax.tree.map(lambda p: "matrices" if len(p.shape) >= 2 else "vectors", params)


# tf.train
_optimizer(
    "sgd",
    optimizers.sgd,
    ("gradient_descent", "GradientDescent", "SGD"),
    {"learning_rate": 0.1},
    f"{_TF1}.GradientDescentOptimizer",
)
_optimizer(
    "momentum",
    optimizers.momentum,
    ("Momentum",),
    {"learning_rate": 0.05, "momentum": 0.9},
    f"{_TF1}.MomentumOptimizer",
)
_optimizer(
    "adagrad",
    optimizers.adagrad,
    ("Adagrad",),
    {"learning_rate": 0.5, "initial_accumulator_value": 0.1},
    f"{_TF1}.AdagradOptimizer",
)
_optimizer(
    "adagrad_da",
    optimizers.adagrad_da,
    ("AdagradDA",),
    {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001},
    f"{_TF1}.AdagradDAOptimizer",
)
_optimizer(
    "adadelta",
    optimizers.adadelta,
    ("Adadelta",),
    {"learning_rate": 1.0, "rho": 0.9, "eps": 1e-3},
    f"{_TF1}.AdadeltaOptimizer",
)
_optimizer(
    "adam",
    optimizers.adam,
    ("Adam",),
    {"learning_rate": 0.05, "b1": 0.9, "b2": 0.999, "eps": 1e-8},
    f"{_TF1}.AdamOptimizer",
    sparse="all_rows",
)
_optimizer(
    "ftrl",
    optimizers.ftrl,
    ("Ftrl",),
    {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001, "l2_shrinkage": 0.001},
    f"{_TF1}.FtrlOptimizer",
)
_optimizer(
    "proximal_adagrad",
    optimizers.proximal_adagrad,
    ("ProximalAdagrad",),
    {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001},
    f"{_TF1}.ProximalAdagradOptimizer",
)
_optimizer(
    "proximal_sgd",
    optimizers.proximal_sgd,
    ("proximal_gradient_descent", "ProximalGradientDescent"),
    {"learning_rate": 0.1, "l1": 0.001, "l2": 0.001},
    f"{_TF1}.ProximalGradientDescentOptimizer",
)
_optimizer(
    "rmsprop",
    optimizers.rmsprop,
    ("RMSProp",),
    {"learning_rate": 0.01, "decay": 0.9, "momentum": 0.5, "eps": 1e-10},
    f"{_TF1}.RMSPropOptimizer",
)

# tf.contrib.opt
_CONTRIB = "tf.contrib.opt"
_optimizer("adamax", optimizers.adamax, ("AdaMax",), {"learning_rate": 0.05}, f"{_CONTRIB}.AdaMaxOptimizer")
_optimizer(
    "adam_gs",
    optimizers.adam_gs,
    ("AdamGS",),
    {"learning_rate": 0.05},
    f"{_CONTRIB}.AdamGSOptimizer",
    sparse="all_rows",
    extra_args=_global_step,
)
_optimizer(
    "lazy_adam", optimizers.lazy_adam, ("LazyAdam",), {"learning_rate": 0.05}, f"{_CONTRIB}.LazyAdamOptimizer"
)
_optimizer(
    "lazy_adam_gs",
    optimizers.lazy_adam_gs,
    ("LazyAdamGS",),
    {"learning_rate": 0.05},
    f"{_CONTRIB}.LazyAdamGSOptimizer",
    extra_args=_global_step,
)
_optimizer(
    "nadam",
    optimizers.nadam,
    ("Nadam",),
    {"learning_rate": 0.05},
    f"{_CONTRIB}.NadamOptimizer",
    sparse="custom",
)
_optimizer(
    "adamw",
    optimizers.adamw,
    ("AdamW",),
    {"learning_rate": 0.05, "weight_decay": 0.001},
    f"{_CONTRIB}.AdamWOptimizer",
    sparse="custom",
)
_optimizer(
    "momentumw",
    optimizers.momentumw,
    ("MomentumW",),
    {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 0.001},
    f"{_CONTRIB}.MomentumWOptimizer",
)
_optimizer(
    "lars",
    optimizers.lars,
    ("LARS",),
    {
        "learning_rate": _lars_learning_rate,
        "momentum": 0.9,
        "weight_decay": 1e-4,
        "eeta": 0.01,
        "skip": ("bias", "scalar"),
    },
    f"{_CONTRIB}.LARSOptimizer",
    sparse="custom",
)
_optimizer(
    "addsign",
    optimizers.addsign,
    ("AddSign",),
    {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.9, "sign_decay": 0.5},
    f"{_CONTRIB}.AddSignOptimizer",
    sparse="custom",
)
_optimizer(
    "powersign",
    optimizers.powersign,
    ("PowerSign",),
    {"learning_rate": 0.1, "base": math.e, "beta": 0.9, "sign_decay": 0.5},
    f"{_CONTRIB}.PowerSignOptimizer",
    sparse="custom",
)
_optimizer(
    "ggt",
    optimizers.ggt,
    ("GGT",),
    {"learning_rate": 0.05, "b1": 0.9, "eps": 1e-4, "svd_eps": 1e-6, "sigma_eps": 1e-2},
    f"{_CONTRIB}.GGTOptimizer",
    sparse="dense",
)
_optimizer(
    "shampoo",
    optimizers.shampoo,
    ("Shampoo",),
    {
        "learning_rate": 0.5,
        "eps": 0.1,
        "gbar_weight": 1.0,
        "mat_gbar_decay": 1.0,
        "mat_gbar_weight": 1.0,
        "alpha": 0.5,
    },
    f"{_CONTRIB}.ShampooOptimizer",
    sparse="dense",
)
_optimizer(
    "reg_adagrad",
    optimizers.reg_adagrad,
    ("RegAdagrad",),
    {"learning_rate": 0.5},
    f"{_CONTRIB}.RegAdagradOptimizer",
)

# RETURNN
_RETURNN = "RETURNN"
_optimizer(
    "amsgrad",
    optimizers.amsgrad,
    ("AMSGrad",),
    {"learning_rate": 0.05, "eps": 1e-8},
    f"{_RETURNN} AMSGradOptimizer",
    sparse="dense",
)
_optimizer(
    "grad_variance_scaled",
    optimizers.grad_variance_scaled,
    ("GradVarianceScaled",),
    {"learning_rate": 0.1},
    f"{_RETURNN} GradVarianceScaledOptimizer",
    sparse="custom",
)
_optimizer(
    "neural_optimizer1",
    optimizers.neural_optimizer1,
    ("NeuralOptimizer1",),
    {"learning_rate": 0.1},
    f"{_RETURNN} NeuralOptimizer1",
    sparse="custom",
)
_optimizer(
    "normalized_sgd",
    optimizers.normalized_sgd,
    ("NormalizedSGD",),
    {"learning_rate": 0.02},
    f"{_RETURNN} NormalizedSGD",
    sparse="custom",
)

# building blocks and combinators
_transform("identity", combinators.identity)
_transform("scale", transforms.scale, {"step_size": -0.1})
_transform("scale_by_learning_rate", transforms.scale_by_learning_rate, {"learning_rate": 0.1})
_transform(
    "scale_by_schedule",
    transforms.scale_by_schedule,
    {"step_size_fn": lambda count: -0.1 / (1.0 + 0.01 * count)},
)
_transform("trace", transforms.trace, {"momentum": 0.9})
_transform("scale_by_adagrad", transforms.scale_by_adagrad, {"initial_accumulator_value": 0.1})
_transform("scale_by_adagrad_da", transforms.scale_by_adagrad_da, {"learning_rate": 0.5, "l1": 0.001})
_transform("scale_by_adadelta", transforms.scale_by_adadelta, {"rho": 0.9, "eps": 1e-3})
_transform(
    "scale_by_adam", transforms.scale_by_adam, {"b1": 0.9, "b2": 0.999, "eps": 1e-8}, sparse="all_rows"
)
_transform(
    "scale_by_ftrl", transforms.scale_by_ftrl, {"learning_rate": 0.5, "l1": 0.001, "l2_shrinkage": 0.001}
)
_transform(
    "scale_by_proximal_adagrad", transforms.scale_by_proximal_adagrad, {"learning_rate": 0.5, "l1": 0.001}
)
_transform("scale_by_proximal_sgd", transforms.scale_by_proximal_sgd, {"learning_rate": 0.1, "l1": 0.001})
_transform("scale_by_rmsprop", transforms.scale_by_rmsprop, {"learning_rate": 0.01, "momentum": 0.5})
_transform("scale_by_adamax", transforms.scale_by_adamax, {"b1": 0.9, "b2": 0.999, "eps": 1e-8})
_transform(
    "scale_by_amsgrad", transforms.scale_by_amsgrad, {"b1": 0.9, "b2": 0.99, "eps": 1e-8}, sparse="dense"
)
_transform(
    "scale_by_lars",
    transforms.scale_by_lars,
    {"momentum": 0.9, "weight_decay": 1e-4, "eeta": 0.001},
    sparse="custom",
)
_transform(
    "scale_by_neural_optimizer1",
    transforms.scale_by_neural_optimizer1,
    {"b1": 0.9, "decrease_factor": 0.1},
    sparse="custom",
)
_transform(
    "scale_by_grad_variance",
    transforms.scale_by_grad_variance,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-8},
    sparse="custom",
)
_transform("scale_by_l2_normalization", transforms.scale_by_l2_normalization, {"eps": 1e-12}, sparse="custom")
_transform(
    "scale_by_addsign",
    transforms.scale_by_addsign,
    {"alpha": 1.0, "beta": 0.9, "sign_decay": 0.5},
    sparse="custom",
)
_transform(
    "scale_by_powersign",
    transforms.scale_by_powersign,
    {"base": 2.0, "beta": 0.9, "sign_decay": 0.5},
    sparse="custom",
)
_transform("scale_by_ggt", transforms.scale_by_ggt, {"b1": 0.9, "eps": 1e-4}, sparse="dense")
_transform("scale_by_shampoo", transforms.scale_by_shampoo, {"eps": 0.1}, sparse="dense")
_transform(
    "per_leaf",
    transforms.per_leaf,
    {"init_slots": _custom_sgd_slots, "apply": _custom_sgd_apply, "learning_rate": 0.1},
    sparse="dense",
)
_transform("clip_variables", combinators.clip_variables, {"max_norm": 1.0, "dims": {"kernel": [1]}})
# TF clips an IndexedSlices by its values as they are (duplicates included): "custom".
_transform("clip", combinators.clip, {"max_delta": 0.5}, sparse="custom")
_transform("clip_by_norm", combinators.clip_by_norm, {"max_norm": 0.5}, sparse="custom")
_transform("clip_by_global_norm", combinators.clip_by_global_norm, {"max_norm": 0.5}, sparse="custom")
_transform("transform_gradients", combinators.transform_gradients, {"fn": _halve})
_transform("add_noise", combinators.add_noise, {"scale": 0.01, "seed": 0}, sparse="dense")
_transform("scale_gradients", combinators.scale_gradients, {"multipliers": {"kernel": 0.5, "bias": 2.0}})
_transform("add_decayed_weights", combinators.add_decayed_weights, {"weight_decay": 0.01})
_transform("freeze", combinators.freeze, {"mask": ["bias"]})
_wrapper("masked", combinators.masked, {"inner": optimizers.sgd(0.1), "mask": ["kernel"]})
_wrapper(
    "partition",
    combinators.partition,
    {
        "transforms": {"matrices": optimizers.sgd(0.1), "vectors": optimizers.momentum(0.05, 0.9)},
        "param_labels": _by_rank,
    },
)
_wrapper(
    "accumulate_gradients",
    combinators.accumulate_gradients,
    {"tx": optimizers.momentum(0.05, 0.9), "every_k": 2},
    sparse="dense",
)
_wrapper(
    "apply_if_finite",
    combinators.apply_if_finite,
    {"tx": optimizers.adam(0.05), "max_consecutive_errors": 3},
    sparse="all_rows",
)
_wrapper(
    "decoupled_weight_decay",
    combinators.decoupled_weight_decay,
    {"tx": optimizers.momentum(0.05, 0.9), "weight_decay": 0.01},
)
_wrapper(
    "moving_average",
    combinators.moving_average,
    {"tx": optimizers.sgd(0.1), "average_decay": 0.9, "num_updates": True},
)

# gradtx.parallel: run `update` inside jax.shard_map / jax.pmap over `axis_name`
_SGD = optimizers.sgd(0.1)
register(
    Entry(
        "cross_shard",
        parallel.cross_shard,
        "wrapper",
        aliases=("CrossShardOptimizer",),
        example={"tx": _SGD, "axis_name": "data"},
        reference="tf.contrib.tpu.CrossShardOptimizer",
    )
)
register(
    Entry(
        "tower_reduce",
        parallel.tower_reduce,
        "wrapper",
        aliases=("TowerOptimizer",),
        example={"tx": _SGD, "axis_name": "data"},
        reference="tf.contrib.estimator.TowerOptimizer (replicate_model_fn)",
    )
)
register(
    Entry(
        "sync_replicas",
        parallel.sync_replicas,
        "wrapper",
        aliases=("SyncReplicasOptimizer", "SyncReplicas"),
        example={"tx": _SGD, "axis_name": "data", "replicas_to_aggregate": 1},
        reference=f"{_TF1}.SyncReplicasOptimizer",
        sparse="dense",
    )
)
register(
    Entry(
        "model_average",
        parallel.model_average,
        "wrapper",
        aliases=("ModelAverageOptimizer",),
        example={"tx": _SGD, "axis_name": "data", "interval_steps": 2},
        reference=f"{_CONTRIB}.ModelAverageOptimizer",
        sparse="custom",
    )
)
register(
    Entry(
        "elastic_average",
        parallel.elastic_average,
        "wrapper",
        aliases=("ElasticAverageOptimizer",),
        example={"tx": _SGD, "axis_name": "data", "communication_period": 2, "moving_rate": 0.1, "rho": 0.05},
        reference=f"{_CONTRIB}.ElasticAverageOptimizer",
        sparse="custom",
    )
)
register(
    Entry(
        "agn",
        parallel.agn,
        "wrapper",
        aliases=("AGNOptimizer",),
        example={"tx": _SGD, "axis_name": "data", "communication_period": 2},
        reference=f"{_CONTRIB}.AGNOptimizer",
        sparse="custom",
    )
)
register(
    Entry(
        "drop_stale_gradients",
        parallel.drop_stale_gradients,
        "wrapper",
        aliases=("DropStaleGradientOptimizer", "DropStaleGradient"),
        example={"tx": _SGD, "staleness": 1},
        extra_args=lambda t: {"grad_step": t},
        reference=f"{_CONTRIB}.DropStaleGradientOptimizer",
    )
)
register(
    Entry(
        "sharded_state",
        parallel.sharded_state,
        "wrapper",
        aliases=("ZeRO1",),
        example={"tx": _SGD, "axis_name": "data"},
        reference="ZeRO stage 1 (beyond the seeds)",
        sparse="dense",
    )
)


OPTIMIZER_NAMES: tuple[str, ...] = names("optimizer")
"""The gradtx names of the built-in optimizers, sorted.

(`registry.names("optimizer")` includes later registrations.)"""
