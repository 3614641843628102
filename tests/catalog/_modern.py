"""Element-wise optimizers after TF1 (Lion, RAdam, AdaBelief, Yogi, Adan, NAdamW, signSGD, Signum, Rprop) and
their building blocks: optax's numbers (`Entry.reference` names the optax function).

Sparse rules: the sign steps keep a row-sparse gradient's rows (the sign of an untouched
row is 0: the dense rule); every rule with a moment or a step size per element densifies
it, as optax's numbers need (its slots move on every row).
"""

from __future__ import annotations

from gradtx import optimizers, transforms
from tests.catalog._entries import BOUNDS_INF, SIGN_OF_MOMENTUM, optimizer, transform

OPTAX = "optax"
"""The module of optax's optimizers, for `Entry.reference`."""


def _sign_rate(count):
    """An example rate for the sign steps: a decaying schedule (a constant one ends oscillating by its own
    size around the optimum)."""
    return 0.05 * 0.99**count


optimizer(
    "lion",
    optimizers.lion,
    ("Lion",),
    {"learning_rate": _sign_rate},
    f"{OPTAX}.lion",
    sparse="dense",
    nonfinite=SIGN_OF_MOMENTUM,
)
optimizer("radam", optimizers.radam, ("RAdam",), {"learning_rate": 0.05}, f"{OPTAX}.radam", sparse="dense")
optimizer(
    "adabelief",
    optimizers.adabelief,
    ("AdaBelief",),
    {"learning_rate": 0.05},
    f"{OPTAX}.adabelief",
    sparse="dense",
)
optimizer(
    "yogi",
    optimizers.yogi,
    ("Yogi",),
    {"learning_rate": 0.05, "initial_accumulator_value": 1e-6},
    f"{OPTAX}.yogi",
    sparse="dense",
)
optimizer(
    "adan",
    optimizers.adan,
    ("Adan",),
    {"learning_rate": 0.05, "weight_decay": 1e-4},
    f"{OPTAX}.adan",
    sparse="dense",
)
optimizer(
    "nadamw",
    optimizers.nadamw,
    ("NAdamW",),
    {"learning_rate": 0.05, "weight_decay": 1e-4},
    f"{OPTAX}.nadamw",
    sparse="dense",
)
optimizer(
    "sign_sgd",
    optimizers.sign_sgd,
    ("SignSGD",),
    {"learning_rate": _sign_rate},
    f"{OPTAX}.sign_sgd",
    nonfinite=BOUNDS_INF,
)
optimizer(
    "signum",
    optimizers.signum,
    ("Signum",),
    {"learning_rate": _sign_rate, "beta": 0.9},
    f"{OPTAX}.signum",
    sparse="dense",
    nonfinite=SIGN_OF_MOMENTUM,
)
optimizer(
    "rprop",
    optimizers.rprop,
    ("Rprop",),
    {"learning_rate": 0.1},
    f"{OPTAX}.rprop",
    sparse="dense",
    nonfinite=BOUNDS_INF,
)

transform("scale_by_sign", transforms.scale_by_sign, nonfinite=BOUNDS_INF)
transform(
    "scale_by_lion",
    transforms.scale_by_lion,
    {"b1": 0.9, "b2": 0.99},
    sparse="dense",
    nonfinite=SIGN_OF_MOMENTUM,
)
transform(
    "scale_by_radam",
    transforms.scale_by_radam,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-8, "threshold": 5.0},
    sparse="dense",
)
transform(
    "scale_by_belief",
    transforms.scale_by_belief,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-16, "eps_root": 1e-16},
    sparse="dense",
)
transform(
    "scale_by_yogi",
    transforms.scale_by_yogi,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-3, "initial_accumulator_value": 1e-6},
    sparse="dense",
)
transform(
    "scale_by_adan",
    transforms.scale_by_adan,
    {"b1": 0.98, "b2": 0.92, "b3": 0.99, "eps": 1e-8},
    sparse="dense",
)
transform(
    "scale_by_rprop",
    transforms.scale_by_rprop,
    {"learning_rate": 0.1, "eta_minus": 0.5, "eta_plus": 1.2},
    sparse="dense",
    nonfinite=BOUNDS_INF,
)
