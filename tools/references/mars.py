"""References of gradtx/_algorithms/mars.py: pytorch-optimizer's `MARS`."""

from tools.references import Case

CASES = [
    Case("default", "pytorch_optimizer.MARS", {}),
    Case(
        "lion",
        "pytorch_optimizer.MARS",
        {"lr": 1e-3, "mars_type": "lion", "gamma": 0.05, "weight_decay": 0.1, "lr_1d": 1e-3},
    ),
    Case(
        "optimize_1d",
        "pytorch_optimizer.MARS",
        {"lr": 0.01, "betas": (0.9, 0.95), "optimize_1d": True, "weight_decay": 0.05, "fixed_decay": True},
    ),
    Case(
        "ams_cautious",
        "pytorch_optimizer.MARS",
        {"lr": 0.02, "gamma": 0.1, "ams_bound": True, "cautious": True, "betas_1d": (0.8, 0.9), "eps": 1e-6},
    ),
    Case("lion_1d_cautious", "pytorch_optimizer.MARS", {"lr": 0.003, "mars_type": "lion", "cautious": True}),
    Case(
        "foreach_off",
        "pytorch_optimizer.MARS",
        {"lr": 0.01, "weight_decay": 0.01, "weight_decay_1d": 0.0, "foreach": False},
    ),
    Case(
        "coupled",
        "pytorch_optimizer.MARS",
        {"lr": 0.01, "gamma": 0.1, "weight_decay": 0.5, "weight_decay_1d": 0.5, "weight_decouple": False},
    ),
    Case(
        "coupled_lion_1d",
        "pytorch_optimizer.MARS",
        {
            "lr": 0.003,
            "mars_type": "lion",
            "optimize_1d": True,
            "weight_decay": 0.3,
            "weight_decouple": False,
        },
    ),
]
