"""References of gradtx/_algorithms/laprop.py: pytorch-optimizer's `LaProp`."""

from tools.references import Case

PATH = "pytorch_optimizer.LaProp"

CASES = [
    Case("default", PATH, {}),
    Case("betas_decay", PATH, {"lr": 0.01, "betas": [0.8, 0.99], "weight_decay": 0.1, "eps": 1e-8}),
    Case("fixed_decay", PATH, {"lr": 0.01, "weight_decay": 0.05, "fixed_decay": True}),
    Case("coupled", PATH, {"lr": 0.01, "weight_decay": 0.5, "weight_decouple": False}),
    Case("centered", PATH, {"lr": 0.01, "centered": True, "steps_before_using_centered": 5}),
    Case("ams_bound", PATH, {"lr": 0.01, "betas": [0.9, 0.9], "ams_bound": True}),
    Case(
        "centered_ams",
        PATH,
        {
            "lr": 0.02,
            "betas": [0.9, 0.95],
            "centered": True,
            "steps_before_using_centered": 3,
            "ams_bound": True,
        },
    ),
    Case("cautious", PATH, {"lr": 0.01, "weight_decay": 0.01, "cautious": True}),
]
