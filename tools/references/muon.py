"""References of gradtx/_algorithms/muon.py: pytorch-optimizer's `Muon` (its named Newton-Schulz schedules).

pytorch-optimizer's Muon family takes parameter groups flagged `use_muon`: here the 2-D and 4-D leaves are
Muon's (a leaf seen as a matrix of `shape[0]` rows) and the vector is the AdamW group's, as its docstring
routes them. Its Newton-Schulz iteration runs in bfloat16 (`zero_power_via_newton_schulz_5(dtype=
torch.bfloat16)`, not an argument of the classes); `run` records it in float32 (the function's `dtype`
default patched), which the float32 replay can be compared with to 1e-5: in bfloat16, one rounding tie
broken otherwise changes a matrix's update by a few percent.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from tools.references import Case


def muon_groups(cls: Any, named: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """The reference built with the matrices (2-D and 4-D leaves) in a `use_muon` group, the rest AdamW's."""
    return cls(
        [
            {"params": [p for p in named.values() if p.ndim >= 2], "use_muon": True},
            {"params": [p for p in named.values() if p.ndim < 2], "use_muon": False},
        ],
        **kwargs,
    )


@contextlib.contextmanager
def float32_newton_schulz():
    """pytorch-optimizer's `zero_power_via_newton_schulz_5` iterating in float32 (its `dtype` default)."""
    import torch
    from pytorch_optimizer.optimizer.utils import matrix

    fn = matrix.zero_power_via_newton_schulz_5
    saved = fn.__defaults__
    assert saved is not None and saved[-1] is torch.bfloat16, saved
    fn.__defaults__ = (*saved[:-1], torch.float32)
    try:
        yield
    finally:
        fn.__defaults__ = saved


def run(case: Case, prob: dict[str, Any]) -> dict[str, np.ndarray]:
    """The default torch loop with the reference's Newton-Schulz iteration in float32."""
    from tools.record_references import _run_torch

    with float32_newton_schulz():
        return _run_torch(case, prob)


_MUON = "pytorch_optimizer.Muon"

CASES = [
    Case("original", _MUON, {"nesterov": False}, build=muon_groups),
    Case(
        "polar_express",
        _MUON,
        {"nesterov": False, "ns_coeffs": "polar_express", "ns_steps": 8, "lr": 0.01, "momentum": 0.9},
        build=muon_groups,
    ),
    Case(
        "polar_express_safer",
        _MUON,
        {"nesterov": False, "ns_coeffs": "polar_express_safer", "weight_decay": 0.1, "adamw_wd": 0.05},
        build=muon_groups,
    ),
    Case(
        "quintic_adjusted",
        _MUON,
        {
            "nesterov": False,
            "ns_coeffs": "quintic",
            "use_adjusted_lr": True,
            "adamw_lr": 1e-3,
            "adamw_eps": 1e-8,
        },
        build=muon_groups,
    ),
]
