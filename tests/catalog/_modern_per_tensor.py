"""Optimizers after TF1 with a per-tensor rule (Adafactor, LAMB, NovoGrad, SM3, Muon), schedule-free AdamW /
SGD, and their building blocks: optax's numbers (`Entry.reference` names the optax function)."""

from __future__ import annotations

from gradtx import optimizers, transforms
from tests.catalog._entries import optimizer, transform

OPTAX = "optax"
"""The module of optax's optimizers, for `Entry.reference`."""


def _decaying(count):
    """An example rate for the per-tensor steps: a decaying schedule (a relative or normalised step keeps
    its size near the optimum)."""
    return 0.2 * 0.99**count


optimizer(
    "adafactor",
    optimizers.adafactor,
    ("Adafactor",),
    {"learning_rate": _decaying, "min_dim_size_to_factor": 2, "momentum": 0.5, "weight_decay": 1e-4},
    f"{OPTAX}.adafactor",
    sparse="dense",
)
optimizer(
    "lamb",
    optimizers.lamb,
    ("LAMB",),
    {"learning_rate": _decaying, "weight_decay": 1e-4, "min_norm": 0.1},
    f"{OPTAX}.lamb",
    sparse="dense",
)
optimizer(
    "novograd",
    optimizers.novograd,
    ("NovoGrad",),
    {"learning_rate": _decaying, "weight_decay": 1e-4},
    f"{OPTAX}.novograd",
    sparse="dense",
)
optimizer(
    "sm3", optimizers.sm3, ("SM3",), {"learning_rate": 0.5, "momentum": 0.9}, f"{OPTAX}.sm3", sparse="dense"
)
optimizer(
    "muon",
    optimizers.muon,
    ("Muon",),
    {"learning_rate": _decaying, "weight_decay": 1e-4},
    f"{OPTAX}.contrib.muon",
    sparse="dense",
)
optimizer(
    "schedule_free_adamw",
    optimizers.schedule_free_adamw,
    ("AdamWScheduleFree",),
    {"learning_rate": 0.05, "warmup_steps": 2, "weight_decay": 1e-4},
    f"{OPTAX}.contrib.schedule_free_adamw",
    sparse="dense",
)
optimizer(
    "schedule_free_sgd",
    optimizers.schedule_free_sgd,
    ("SGDScheduleFree",),
    {"learning_rate": 0.1, "warmup_steps": 2, "weight_decay": 1e-4},
    f"{OPTAX}.contrib.schedule_free_sgd",
    sparse="custom",
)

transform(
    "scale_by_factored_rms", transforms.scale_by_factored_rms, {"min_dim_size_to_factor": 2}, sparse="dense"
)
transform("clip_by_block_rms", transforms.clip_by_block_rms, {"threshold": 1.0}, sparse="dense")
transform(
    "scale_by_param_block_rms", transforms.scale_by_param_block_rms, {"min_scale": 1e-3}, sparse="dense"
)
transform("ema", transforms.ema, {"decay": 0.9}, sparse="dense")
transform(
    "scale_by_bias_corrected_adam",
    transforms.scale_by_bias_corrected_adam,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-8},
    sparse="dense",
)
transform(
    "scale_by_bias_corrected_rms",
    transforms.scale_by_bias_corrected_rms,
    {"decay": 0.999, "eps": 1e-8},
    sparse="dense",
)
transform(
    "scale_by_bias_corrected_amsgrad",
    transforms.scale_by_bias_corrected_amsgrad,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-8},
    sparse="dense",
)
transform(
    "scale_by_bias_corrected_adamax",
    transforms.scale_by_bias_corrected_adamax,
    {"b1": 0.9, "b2": 0.999, "eps": 1e-8},
    sparse="dense",
)
transform("scale_by_rms", transforms.scale_by_rms, {"decay": 0.9, "eps": 1e-8}, sparse="dense")
transform("scale_by_stddev", transforms.scale_by_stddev, {"decay": 0.9, "eps": 1e-8}, sparse="dense")
transform("scale_by_rss", transforms.scale_by_rss, {"initial_accumulator_value": 0.1}, sparse="dense")
transform("scale_by_trust_ratio", transforms.scale_by_trust_ratio, {"trust_coefficient": 1.0}, sparse="dense")
transform(
    "scale_by_novograd",
    transforms.scale_by_novograd,
    {"b1": 0.9, "b2": 0.25, "weight_decay": 1e-4},
    sparse="dense",
)
transform("scale_by_sm3", transforms.scale_by_sm3, {"b1": 0.9, "b2": 1.0}, sparse="dense")
transform("scale_by_muon", transforms.scale_by_muon, {"beta": 0.95}, sparse="dense")
transform("scale_by_shape", transforms.scale_by_shape, {}, sparse="dense")
transform(
    "scale_by_schedule_free",
    transforms.scale_by_schedule_free,
    {"learning_rate": 0.1, "b1": 0.9},
    sparse="dense",
)
