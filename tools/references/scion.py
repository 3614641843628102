"""References of gradtx/_algorithms/scion.py: pytorch-optimizer's `SCION` and `SCIONLight`.

Their Newton-Schulz iteration runs in float32 here (tools/references/muon.py says why). A case whose kwargs
hold `groups` (leaf -> that parameter group's own arguments) builds one parameter group per leaf: the
reference's way to give each leaf its norm, gradtx's `partition`. `SCIONLight` keeps its momentum in the
gradient buffers, which its user does not zero: `run` lets `backward` add each step's gradient to them (and
records that gradient, which gradtx's slot is fed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tools import references
from tools.references import SHAPES, Case
from tools.references.muon import float32_newton_schulz
from tools.references.muon import run as _run_float32


def groups(cls: Any, named: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """One parameter group per leaf of `kwargs["groups"]`, with its own arguments."""
    kwargs = dict(kwargs)
    per_leaf = kwargs.pop("groups")
    return cls([{"params": [named[k]], **g} for k, g in per_leaf.items()], **kwargs)


def run(case: Case, prob: dict[str, Any]) -> dict[str, np.ndarray]:
    """SCION: the default torch loop; SCIONLight: the gradients added to the buffers it keeps."""
    if not case.path.endswith("SCIONLight"):
        return _run_float32(case, prob)
    import torch

    from tools.record_references import _class

    named = {k: torch.nn.Parameter(torch.tensor(prob["init"][k])) for k in SHAPES}
    curv = {k: torch.tensor(prob["curv"][k]) for k in SHAPES}
    cls = _class(case.path)
    opt = (
        groups(cls, named, case.kwargs)
        if "groups" in case.kwargs
        else cls(list(named.values()), **case.kwargs)
    )
    out: dict[str, np.ndarray] = {}
    with float32_newton_schulz():
        for t in range(case.steps):
            noise = {k: torch.tensor(prob["noise"][t][k]) for k in SHAPES}
            loss = sum(
                (0.5 * curv[k] * p * p + references.QUARTIC * p**4 + noise[k] * p).sum()
                for k, p in named.items()
            )
            fresh = torch.autograd.grad(loss, list(named.values()))
            for (k, p), g in zip(named.items(), fresh, strict=True):
                out[f"{case.label}/grads/{t}/{k}"] = g.numpy().copy()
                p.grad = g.clone() if p.grad is None else p.grad.add_(g)  # backward's accumulation
            opt.step()
            for k, p in named.items():
                out[f"{case.label}/params/{t}/{k}"] = p.detach().numpy().copy()
    return out


_GROUPS_A = {
    "conv": {"norm_type": 3, "norm_kwargs": {"num_steps": 6}},
    "matrix": {"norm_type": 6, "norm_kwargs": {"normalized": True}},
    "vector": {"norm_type": 0, "scale": 0.5},
}
_GROUPS_B = {
    "conv": {"norm_type": 4, "norm_kwargs": {"normalize": False}, "scale": 0.1},
    "matrix": {"norm_type": 2, "norm_kwargs": {"max_scale": True, "normalize": False}},
    "vector": {"norm_type": 5, "lr": 0.003},
}
_GROUPS_C = {
    "conv": {"norm_type": 4},
    "matrix": {"norm_type": 7, "norm_kwargs": {"transpose": True, "normalized": False}},
    "vector": {"norm_type": 1},
}


def _cases(path: str) -> list[Case]:
    return [
        Case("default", path, {}),
        Case("constraint", path, {"constraint": True, "lr": 0.01, "momentum": 0.5, "scale": 2.0}),
        Case("decay", path, {"weight_decay": 0.1, "lr": 0.01, "momentum": 0.3}),
        Case("coupled", path, {"weight_decay": 0.1, "weight_decouple": False, "lr": 0.003, "norm_type": 0}),
        Case("none", path, {"norm_type": 0, "momentum": 0.5, "lr": 0.01, "weight_decay": 0.2}),
        Case("groups_col", path, {"groups": _GROUPS_A, "lr": 0.01}, build=groups),
        Case("groups_spectral", path, {"groups": _GROUPS_B, "lr": 0.01, "momentum": 0.5}, build=groups),
        Case("groups_row", path, {"groups": _GROUPS_C, "lr": 0.005, "weight_decay": 0.05}, build=groups),
    ]


CASES = _cases("pytorch_optimizer.SCION") + [
    Case(f"light_{c.label}", "pytorch_optimizer.SCIONLight", c.kwargs, build=c.build)
    for c in _cases("pytorch_optimizer.SCIONLight")
]
