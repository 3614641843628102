"""tf.contrib.opt's optimizers."""

from __future__ import annotations

import math

from gradtx import optimizers
from tests.catalog._entries import CONTRIB, global_step_arg, optimizer


def _lars_learning_rate(count):
    """An example LARS rate: a decaying schedule (a constant rate keeps LARS oscillating near the optimum)."""
    return 1.0 * 0.99**count


optimizer("adamax", optimizers.adamax, ("AdaMax",), {"learning_rate": 0.05}, f"{CONTRIB}.AdaMaxOptimizer")
optimizer(
    "adam_gs",
    optimizers.adam_gs,
    ("AdamGS",),
    {"learning_rate": 0.05},
    f"{CONTRIB}.AdamGSOptimizer",
    sparse="all_rows",
    extra_args=global_step_arg,
)
optimizer(
    "lazy_adam", optimizers.lazy_adam, ("LazyAdam",), {"learning_rate": 0.05}, f"{CONTRIB}.LazyAdamOptimizer"
)
optimizer(
    "lazy_adam_gs",
    optimizers.lazy_adam_gs,
    ("LazyAdamGS",),
    {"learning_rate": 0.05},
    f"{CONTRIB}.LazyAdamGSOptimizer",
    extra_args=global_step_arg,
)
optimizer(
    "nadam",
    optimizers.nadam,
    ("Nadam",),
    {"learning_rate": 0.05},
    f"{CONTRIB}.NadamOptimizer",
    sparse="decayed_rows",
)
optimizer(
    "adamw",
    optimizers.adamw,
    ("AdamW",),
    {"learning_rate": 0.05, "weight_decay": 0.001},
    f"{CONTRIB}.AdamWOptimizer",
    sparse="custom",
)
optimizer(
    "momentumw",
    optimizers.momentumw,
    ("MomentumW",),
    {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 0.001},
    f"{CONTRIB}.MomentumWOptimizer",
)
optimizer(
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
    f"{CONTRIB}.LARSOptimizer",
    sparse="custom",
)
optimizer(
    "addsign",
    optimizers.addsign,
    ("AddSign",),
    {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.9, "sign_decay": 0.5},
    f"{CONTRIB}.AddSignOptimizer",
    sparse="decayed_rows",
)
optimizer(
    "powersign",
    optimizers.powersign,
    ("PowerSign",),
    {"learning_rate": 0.1, "base": math.e, "beta": 0.9, "sign_decay": 0.5},
    f"{CONTRIB}.PowerSignOptimizer",
    sparse="decayed_rows",
)
optimizer(
    "ggt",
    optimizers.ggt,
    ("GGT",),
    {"learning_rate": 0.05, "b1": 0.9, "eps": 1e-4, "svd_eps": 1e-6, "sigma_eps": 1e-2},
    f"{CONTRIB}.GGTOptimizer",
    sparse="dense",
)
optimizer(
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
    f"{CONTRIB}.ShampooOptimizer",
    sparse="dense",
)
optimizer(
    "reg_adagrad",
    optimizers.reg_adagrad,
    ("RegAdagrad",),
    {"learning_rate": 0.5},
    f"{CONTRIB}.RegAdagradOptimizer",
)
