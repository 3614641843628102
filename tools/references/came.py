"""References of gradtx/_algorithms/came.py: pytorch-optimizer's `CAME`."""

from tools.references import Case

CASES = [
    Case("default", "pytorch_optimizer.CAME", {}),
    Case(
        "betas",
        "pytorch_optimizer.CAME",
        {"lr": 0.01, "betas": (0.8, 0.95, 0.99), "weight_decay": 0.1, "clip_threshold": 0.5},
    ),
    Case("coupled", "pytorch_optimizer.CAME", {"lr": 0.02, "weight_decay": 0.05, "weight_decouple": False}),
    Case(
        "ams_fixed_decay",
        "pytorch_optimizer.CAME",
        {"lr": 0.005, "ams_bound": True, "weight_decay": 0.01, "fixed_decay": True, "eps2": 1e-10},
    ),
    Case("foreach_off", "pytorch_optimizer.CAME", {"lr": 0.01, "foreach": False}),
]
