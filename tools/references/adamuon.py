"""References of gradtx/_algorithms/adamuon.py: pytorch-optimizer's `AdaMuon` (its Newton-Schulz iteration in
float32 and its parameter groups as tools/references/muon.py says)."""

from tools.references import Case
from tools.references.muon import muon_groups, run

_ADAMUON = "pytorch_optimizer.AdaMuon"

CASES = [
    Case("default", _ADAMUON, {}, build=muon_groups),
    Case(
        "betas",
        _ADAMUON,
        {"betas": [0.8, 0.99], "lr": 0.01, "weight_decay": 0.1, "ns_coeffs": "polar_express"},
        build=muon_groups,
    ),
    Case(
        "keller",
        _ADAMUON,
        {
            "use_adjusted_lr": False,
            "adamw_lr": 1e-3,
            "adamw_betas": [0.9, 0.95],
            "adamw_wd": 0.1,
            "eps": 1e-8,
        },
        build=muon_groups,
    ),
    Case(
        "coupled",
        _ADAMUON,
        {
            "weight_decouple": False,
            "weight_decay": 0.05,
            "adamw_wd": 0.02,
            "ns_steps": 6,
            "ns_coeffs": "quintic",
        },
        build=muon_groups,
    ),
]

__all__ = ["CASES", "run"]
