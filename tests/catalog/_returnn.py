"""RETURNN's own optimizers."""

from __future__ import annotations

from gradtx import optimizers
from tests.catalog._entries import optimizer

optimizer(
    "amsgrad",
    optimizers.amsgrad,
    ("AMSGrad",),
    {"learning_rate": 0.05, "eps": 1e-8},
    "RETURNN AMSGradOptimizer",
    sparse="dense",
)
optimizer(
    "grad_variance_scaled",
    optimizers.grad_variance_scaled,
    ("GradVarianceScaled",),
    {"learning_rate": 0.1},
    "RETURNN GradVarianceScaledOptimizer",
    sparse="entries",
)
optimizer(
    "neural_optimizer1",
    optimizers.neural_optimizer1,
    ("NeuralOptimizer1",),
    {"learning_rate": 0.1},
    "RETURNN NeuralOptimizer1",
    sparse="entries",
)
optimizer(
    "normalized_sgd",
    optimizers.normalized_sgd,
    ("NormalizedSGD",),
    {"learning_rate": 0.02},
    "RETURNN NormalizedSGD",
    sparse="values",
)
