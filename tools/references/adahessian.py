"""References of gradtx/_algorithms/adahessian.py: pytorch-optimizer's `AdaHessian`.

Its Hutchinson probes (`torch.randint_like` for random signs, `torch.randn_like` for normal ones) are
recorded; the test replays them through `gradtx.hutchinson_diag_hessian`.
"""

from tools.references import Case

_PATH = "pytorch_optimizer.AdaHessian"
_PROBES = ("torch.randint_like", "torch.randn_like")

CASES = [
    Case("default", _PATH, {}, create_graph=True, capture=_PROBES),
    Case(
        "period_power",
        _PATH,
        {"lr": 0.05, "betas": [0.8, 0.99], "update_period": 3, "hessian_power": 0.5},
        create_graph=True,
        capture=_PROBES,
    ),
    Case(
        "gaussian_coupled",
        _PATH,
        {
            "lr": 0.02,
            "num_samples": 2,
            "hessian_distribution": "gaussian",
            "weight_decay": 0.1,
            "weight_decouple": False,
            "eps": 1e-8,
        },
        create_graph=True,
        capture=_PROBES,
    ),
    Case(
        "fixed_decay",
        _PATH,
        {"lr": 0.03, "weight_decay": 0.02, "fixed_decay": True, "update_period": 2, "num_samples": 3},
        create_graph=True,
        capture=_PROBES,
    ),
]
