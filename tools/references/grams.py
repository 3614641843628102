"""References of gradtx/_algorithms/grams.py: pytorch-optimizer's `Grams`."""

from tools.references import Case

PATH = "pytorch_optimizer.Grams"

CASES = [
    Case("default", PATH, {}),
    Case("betas_decay", PATH, {"lr": 0.01, "betas": [0.8, 0.99], "weight_decay": 0.1, "eps": 1e-8}),
    Case("coupled", PATH, {"lr": 0.01, "weight_decay": 0.5, "weight_decouple": False}),
    Case("large_rate", PATH, {"lr": 0.1, "betas": [0.95, 0.9], "eps": 1e-3, "foreach": True}),
]
