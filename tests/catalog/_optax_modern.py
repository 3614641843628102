"""optax's later element-wise optimizers (AdEMAMix, simplified AdEMAMix, ADOPT, MADGRAD, ACProp, Fromage,
optimistic gradient descent and Adam, noisy SGD, AdaMaxW) and their building blocks: optax's numbers
(`Entry.reference` names the optax function).

Sparse rules: every rule with a moment or a per-element statistic densifies a row-sparse
gradient, as optax's numbers need (its slots move on every row); MADGRAD's and Fromage's weight
decay reaches the gradient's rows only (`add_decayed_weights`, `decoupled_weight_decay`), their
step is dense ("custom": tests/test_contract_sparse.py holds their references).
"""

from __future__ import annotations

from types import MappingProxyType

from gradtx import optimizers, transforms
from tests.catalog._entries import optimizer, transform

OPTAX = "optax"
"""The module of optax's optimizers, for `Entry.reference`."""

CLIPPED_BY_SECOND_MOMENT = MappingProxyType({"nan": "propagates", "inf": "sticks", "-inf": "sticks"})
"""`Entry.nonfinite` of ADOPT (with its clipping): an infinite gradient is clipped, so the params stay
finite, but the second moment is infinite for good and every later normalised gradient is 0."""

optimizer(
    "ademamix",
    optimizers.ademamix,
    ("AdEMAMix",),
    {"learning_rate": 0.05, "b3": 0.999, "weight_decay": 1e-4},
    f"{OPTAX}.contrib.ademamix",
    sparse="dense",
)
optimizer(
    "simplified_ademamix",
    optimizers.simplified_ademamix,
    ("SimplifiedAdEMAMix",),
    {"learning_rate": 0.005, "b1": 0.9, "alpha": 1.0},
    f"{OPTAX}.contrib.simplified_ademamix",
    sparse="dense",
)
optimizer(
    "adopt",
    optimizers.adopt,
    ("ADOPT",),
    {"learning_rate": 0.05},
    f"{OPTAX}.contrib.adopt",
    sparse="dense",
    nonfinite=CLIPPED_BY_SECOND_MOMENT,
)
optimizer(
    "acprop",
    optimizers.acprop,
    ("ACProp",),
    {"learning_rate": 0.05, "weight_decay": 1e-4},
    f"{OPTAX}.contrib.acprop",
    sparse="dense",
)
optimizer(
    "madgrad",
    optimizers.madgrad,
    ("MADGRAD",),
    {"learning_rate": 0.05, "weight_decay": 1e-4},
    f"{OPTAX}.contrib.madgrad",
    sparse="custom",
)
# `min_norm` 1: the contract's quadratic has parameters whose optimum lies across 0, which a step relative
# to the parameter's own norm (the trust ratio of a norm near 0) approaches ever more slowly
optimizer(
    "fromage",
    optimizers.fromage,
    ("Fromage",),
    {"learning_rate": 0.05, "min_norm": 1.0},
    f"{OPTAX}.fromage",
    sparse="custom",
)
optimizer(
    "optimistic_gradient_descent",
    optimizers.optimistic_gradient_descent,
    ("OptimisticGradientDescent", "OGD"),
    {"learning_rate": 0.05},
    f"{OPTAX}.optimistic_gradient_descent",
    sparse="dense",
)
optimizer(
    "optimistic_adam",
    optimizers.optimistic_adam,
    ("OptimisticAdam",),
    {"learning_rate": 0.05},
    f"{OPTAX}.optimistic_adam_v2",
    sparse="dense",
)
optimizer(
    "noisy_sgd",
    optimizers.noisy_sgd,
    ("NoisySGD",),
    {"learning_rate": 0.05, "eta": 1e-4},
    f"{OPTAX}.noisy_sgd",
    sparse="dense",
)
optimizer(
    "adamaxw",
    optimizers.adamaxw,
    ("AdaMaxW",),
    {"learning_rate": 0.05, "weight_decay": 1e-4},
    f"{OPTAX}.adamaxw",
    sparse="dense",
)

transform(
    "scale_by_ademamix",
    transforms.scale_by_ademamix,
    {"b1": 0.9, "b2": 0.999, "b3": 0.999, "alpha": 5.0},
    sparse="dense",
)
transform(
    "scale_by_simplified_ademamix",
    transforms.scale_by_simplified_ademamix,
    {"b1": 0.9, "b2": 0.95, "alpha": 1.0},
    sparse="dense",
)
transform(
    "scale_by_adopt",
    transforms.scale_by_adopt,
    {"b1": 0.9, "b2": 0.9999, "eps": 1e-6},
    sparse="dense",
    nonfinite=CLIPPED_BY_SECOND_MOMENT,
)
transform(
    "scale_by_acprop", transforms.scale_by_acprop, {"b1": 0.9, "b2": 0.999, "eps": 1e-16}, sparse="dense"
)
transform("scale_by_madgrad", transforms.scale_by_madgrad, {"learning_rate": 0.05}, sparse="dense")
transform(
    "scale_by_optimistic_gradient",
    transforms.scale_by_optimistic_gradient,
    {"alpha": 1.0, "beta": 0.5},
    sparse="dense",
)
