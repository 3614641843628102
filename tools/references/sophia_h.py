"""References of gradtx/_algorithms/sophia_h.py: pytorch-optimizer's `SophiaH`.

Its Hutchinson probes (`torch.randn_like` by default, `torch.randint_like` for random signs) are
recorded; the test replays them through `gradtx.hutchinson_diag_hessian`.
"""

from tools.references import Case

_PATH = "pytorch_optimizer.SophiaH"
_PROBES = ("torch.randint_like", "torch.randn_like")

CASES = [
    Case("default", _PATH, {}, create_graph=True, capture=_PROBES),
    Case(
        "clip_betas_period1",
        _PATH,
        {"lr": 0.02, "betas": [0.9, 0.95], "p": 2.0, "update_period": 1},
        create_graph=True,
        capture=_PROBES,
    ),
    Case(
        "rademacher_coupled",
        _PATH,
        {
            "lr": 0.03,
            "p": 1.0,
            "update_period": 3,
            "num_samples": 2,
            "hessian_distribution": "rademacher",
            "weight_decay": 0.1,
            "weight_decouple": False,
            "eps": 1e-4,
        },
        create_graph=True,
        capture=_PROBES,
    ),
    Case(
        "fixed_decay",
        _PATH,
        {"lr": 0.05, "p": 0.5, "weight_decay": 0.05, "fixed_decay": True, "update_period": 4},
        create_graph=True,
        capture=_PROBES,
    ),
]
