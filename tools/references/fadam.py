"""References of gradtx/_algorithms/fadam.py: pytorch-optimizer's `FAdam`."""

from tools.references import Case

PATH = "pytorch_optimizer.FAdam"

CASES = [
    Case("default", PATH, {}),
    Case("betas_clip", PATH, {"lr": 0.01, "betas": [0.8, 0.99], "clip": 0.5, "weight_decay": 0.01}),
    Case("adaptive_eps", PATH, {"lr": 0.01, "eps": 0.05, "eps_2": 0.01}),
    Case("power", PATH, {"lr": 0.01, "p": 0.25, "weight_decay": 0.0, "foreach": True}),
    Case("per_param", PATH, {"lr": 0.02, "weight_decay": 0.3, "clip": 2.0, "foreach": False}),
]
