"""References of gradtx/_algorithms/stable_adamw.py: pytorch-optimizer's `StableAdamW`."""

from tools.references import Case

PATH = "pytorch_optimizer.StableAdamW"

CASES = [
    Case("default", PATH, {}),
    Case("betas", PATH, {"lr": 0.01, "betas": [0.8, 0.999], "weight_decay": 0.1, "eps": 1e-6}),
    Case("coupled", PATH, {"lr": 0.01, "weight_decay": 0.05, "weight_decouple": False}),
    Case("clipped", PATH, {"lr": 0.5, "betas": [0.5, 0.6], "weight_decay": 0.0, "kahan_sum": False}),
]
