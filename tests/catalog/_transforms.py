"""The building blocks (`gradtx.transforms`)."""

from __future__ import annotations

from gradtx import combinators, transforms
from tests.catalog._entries import FTRL, global_step_arg, transform


def _custom_sgd_slots(param):
    """`per_leaf` example (RETURNN's CustomGradientDescentOptimizer): no slots."""
    del param
    return {}


def _custom_sgd_apply(grad, param, slots, count, learning_rate):
    """`per_leaf` example: the step to subtract is `learning_rate * grad`."""
    del param, count
    return learning_rate * grad, slots


transform("identity", combinators.identity)
transform("scale", transforms.scale, {"step_size": -0.1})
transform("scale_by_learning_rate", transforms.scale_by_learning_rate, {"learning_rate": 0.1})
transform(
    "scale_by_schedule",
    transforms.scale_by_schedule,
    {"step_size_fn": lambda count: -0.1 / (1.0 + 0.01 * count)},
)
transform("trace", transforms.trace, {"momentum": 0.9})
transform("scale_by_adagrad", transforms.scale_by_adagrad, {"initial_accumulator_value": 0.1})
transform("scale_by_adagrad_da", transforms.scale_by_adagrad_da, {"learning_rate": 0.5, "l1": 0.001})
transform("scale_by_adadelta", transforms.scale_by_adadelta, {"rho": 0.9, "eps": 1e-3})
transform("scale_by_adam", transforms.scale_by_adam, {"b1": 0.9, "b2": 0.999, "eps": 1e-8}, sparse="all_rows")
transform(
    "scale_by_ftrl",
    transforms.scale_by_ftrl,
    {"learning_rate": 0.5, "l1": 0.001, "l2_shrinkage": 0.001},
    nonfinite=FTRL,
)
transform(
    "scale_by_proximal_adagrad", transforms.scale_by_proximal_adagrad, {"learning_rate": 0.5, "l1": 0.001}
)
transform("scale_by_proximal_sgd", transforms.scale_by_proximal_sgd, {"learning_rate": 0.1, "l1": 0.001})
transform("scale_by_rmsprop", transforms.scale_by_rmsprop, {"learning_rate": 0.01, "momentum": 0.5})
transform(
    "scale_by_nesterov_adam",
    transforms.scale_by_nesterov_adam,
    {"b1": 0.9, "b2": 0.999},
    sparse="decayed_rows",
)
transform("scale_by_lazy_adam", transforms.scale_by_lazy_adam, {"b1": 0.9, "b2": 0.999})
transform(
    "scale_by_adam_gs",
    transforms.scale_by_adam_gs,
    {"b1": 0.9},
    sparse="all_rows",
    extra_args=global_step_arg,
)
transform("scale_by_lazy_adam_gs", transforms.scale_by_lazy_adam_gs, {"b1": 0.9}, extra_args=global_step_arg)
transform("scale_by_adamax", transforms.scale_by_adamax, {"b1": 0.9, "b2": 0.999, "eps": 1e-8})
transform(
    "scale_by_amsgrad", transforms.scale_by_amsgrad, {"b1": 0.9, "b2": 0.99, "eps": 1e-8}, sparse="dense"
)
transform(
    "scale_by_lars",
    transforms.scale_by_lars,
    {"momentum": 0.9, "weight_decay": 1e-4, "eeta": 0.001},
    sparse="custom",
)
transform(
    "scale_by_neural_optimizer1",
    transforms.scale_by_neural_optimizer1,
    {"b1": 0.9, "decrease_factor": 0.1},
    sparse="entries",
)
transform(
    "scale_by_grad_variance",
    transforms.scale_by_grad_variance,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-8},
    sparse="entries",
)
transform("scale_by_l2_normalization", transforms.scale_by_l2_normalization, {"eps": 1e-12}, sparse="values")
transform(
    "scale_by_addsign",
    transforms.scale_by_addsign,
    {"alpha": 1.0, "beta": 0.9, "sign_decay": 0.5},
    sparse="decayed_rows",
)
transform(
    "scale_by_powersign",
    transforms.scale_by_powersign,
    {"base": 2.0, "beta": 0.9, "sign_decay": 0.5},
    sparse="decayed_rows",
)
transform("scale_by_ggt", transforms.scale_by_ggt, {"b1": 0.9, "eps": 1e-4}, sparse="dense")
transform("scale_by_shampoo", transforms.scale_by_shampoo, {"eps": 0.1}, sparse="dense")
transform(
    "per_leaf",
    transforms.per_leaf,
    {"init_slots": _custom_sgd_slots, "apply": _custom_sgd_apply, "learning_rate": 0.1},
    sparse="dense",
)
