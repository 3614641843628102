"""tf.train's optimizers (`tf.compat.v1.train.*Optimizer`)."""

from __future__ import annotations

from gradtx import optimizers
from tests.catalog._entries import FTRL, TF1, optimizer

optimizer(
    "sgd",
    optimizers.sgd,
    ("gradient_descent", "GradientDescent", "SGD"),
    {"learning_rate": 0.1},
    f"{TF1}.GradientDescentOptimizer",
)
optimizer(
    "momentum",
    optimizers.momentum,
    ("Momentum",),
    {"learning_rate": 0.05, "momentum": 0.9},
    f"{TF1}.MomentumOptimizer",
)
optimizer(
    "adagrad",
    optimizers.adagrad,
    ("Adagrad",),
    {"learning_rate": 0.5, "initial_accumulator_value": 0.1},
    f"{TF1}.AdagradOptimizer",
)
optimizer(
    "adagrad_da",
    optimizers.adagrad_da,
    ("AdagradDA",),
    {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001},
    f"{TF1}.AdagradDAOptimizer",
)
optimizer(
    "adadelta",
    optimizers.adadelta,
    ("Adadelta",),
    {"learning_rate": 1.0, "rho": 0.9, "eps": 1e-3},
    f"{TF1}.AdadeltaOptimizer",
)
optimizer(
    "adam",
    optimizers.adam,
    ("Adam",),
    {"learning_rate": 0.05, "b1": 0.9, "b2": 0.999, "eps": 1e-8},
    f"{TF1}.AdamOptimizer",
    sparse="all_rows",
)
optimizer(
    "ftrl",
    optimizers.ftrl,
    ("Ftrl",),
    {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001, "l2_shrinkage": 0.001},
    f"{TF1}.FtrlOptimizer",
    nonfinite=FTRL,
)
optimizer(
    "proximal_adagrad",
    optimizers.proximal_adagrad,
    ("ProximalAdagrad",),
    {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001},
    f"{TF1}.ProximalAdagradOptimizer",
)
optimizer(
    "proximal_sgd",
    optimizers.proximal_sgd,
    ("proximal_gradient_descent", "ProximalGradientDescent"),
    {"learning_rate": 0.1, "l1": 0.001, "l2": 0.001},
    f"{TF1}.ProximalGradientDescentOptimizer",
)
optimizer(
    "rmsprop",
    optimizers.rmsprop,
    ("RMSProp",),
    {"learning_rate": 0.01, "decay": 0.9, "momentum": 0.5, "eps": 1e-10},
    f"{TF1}.RMSPropOptimizer",
)
