"""References of gradtx/_algorithms/normuon.py: pytorch-optimizer's `NorMuon` (its Newton-Schulz iteration in
float32 and its parameter groups as tools/references/muon.py says)."""

from tools.references import Case
from tools.references.muon import muon_groups, run

_NORMUON = "pytorch_optimizer.NorMuon"

CASES = [
    Case("default", _NORMUON, {}, build=muon_groups),
    Case(
        "match_rms",
        _NORMUON,
        {"update_scale": "match_rms", "nesterov": False, "beta2": 0.9, "lr": 0.01, "weight_decay": 0.1},
        build=muon_groups,
    ),
    Case(
        "polar_express_adjusted",
        _NORMUON,
        {
            "ns_coeffs": "polar_express",
            "use_adjusted_lr": True,
            "momentum": 0.9,
            "adamw_lr": 1e-3,
            "adamw_betas": [0.8, 0.99],
            "adamw_wd": 0.1,
        },
        build=muon_groups,
    ),
    Case(
        "coupled",
        _NORMUON,
        {"weight_decay": 0.05, "weight_decouple": False, "adamw_wd": 0.02, "eps": 1e-8, "adamw_eps": 1e-8},
        build=muon_groups,
    ),
]

__all__ = ["CASES", "run"]
