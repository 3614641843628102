"""References of gradtx/_algorithms/muonclip.py: pytorch-optimizer's `MuonClip`.

Its Newton-Schulz iteration runs in float32 here (tools/references/muon.py says why). Each leaf is a
parameter group of its own: the 2-D and 4-D leaves Muon's, the vector AdamW's, and the leaves named in the
case's `qk_clip` (leaf -> [attention name, role], which gradtx's `muon_clip` takes as it is) flagged
`qk_clip=role, attention_name=name`. `run` passes `step(attention_max_logits={"attn": logits})` with each
step's per-head maximum logits drawn at random around the threshold (recorded as the case's draws, one per
step), as a model's forward pass would give them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tools import references
from tools.references import SHAPES, Case
from tools.references.muon import float32_newton_schulz

_MUONCLIP = "pytorch_optimizer.MuonClip"

LOGITS = {"default": (2, 60.0, 160.0), "rotary": (4, 50.0, 150.0), "alpha_keller": (2, 80.0, 130.0)}
"""Per case: (heads, low, high) of the uniform per-head maximum logits; a case not here passes none."""


def clip_groups(cls: Any, named: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """One parameter group per leaf: Muon's for rank >= 2, flagged for QK-clip as `kwargs["qk_clip"]` says."""
    kwargs = dict(kwargs)
    spec = kwargs.pop("qk_clip", {})
    groups = []
    for k, p in named.items():
        group = {"params": [p], "use_muon": p.ndim >= 2}
        if k in spec:
            group |= {"attention_name": spec[k][0], "qk_clip": spec[k][1]}
        groups.append(group)
    return cls(groups, **kwargs)


def run(case: Case, prob: dict[str, Any]) -> dict[str, np.ndarray]:
    """The torch loop, each step given the attention logits of `LOGITS`."""
    import torch

    from tools.record_references import _class

    named = {k: torch.nn.Parameter(torch.tensor(prob["init"][k])) for k in SHAPES}
    curv = {k: torch.tensor(prob["curv"][k]) for k in SHAPES}
    opt = clip_groups(_class(case.path), named, case.kwargs)
    rng = np.random.default_rng(7)
    out: dict[str, np.ndarray] = {}
    with float32_newton_schulz():
        for t in range(case.steps):
            opt.zero_grad()
            noise = {k: torch.tensor(prob["noise"][t][k]) for k in SHAPES}
            loss = sum(
                (0.5 * curv[k] * p * p + references.QUARTIC * p**4 + noise[k] * p).sum()
                for k, p in named.items()
            )
            loss.backward()
            for k, p in named.items():
                out[f"{case.label}/grads/{t}/{k}"] = p.grad.detach().numpy().copy()
            if case.label in LOGITS:
                heads, low, high = LOGITS[case.label]
                logits = rng.uniform(low, high, heads).astype(np.float32)
                out[f"{case.label}/draws/{t}"] = logits
                opt.step(attention_max_logits={"attn": torch.tensor(logits)})
            else:
                opt.step()
            for k, p in named.items():
                out[f"{case.label}/params/{t}/{k}"] = p.detach().numpy().copy()
    return out


CASES = [
    Case("default", _MUONCLIP, {"qk_clip": {"matrix": ["attn", "query"], "conv": ["attn", "key"]}}),
    Case(
        "rotary",
        _MUONCLIP,
        {
            "qk_clip": {"matrix": ["attn", "query_rotary"], "conv": ["attn", "key_rotary"]},
            "qk_clip_alpha": 0.3,
            "qk_clip_threshold": 90.0,
            "momentum": 0.9,
            "lr": 0.01,
            "weight_decay": 0.1,
            "ns_coeffs": "polar_express",
        },
    ),
    Case(
        "alpha_keller",
        _MUONCLIP,
        {
            "qk_clip": {"matrix": ["attn", "key"], "conv": ["attn", "query"]},
            "qk_clip_alpha": 0.8,
            "use_adjusted_lr": False,
            "adamw_lr": 1e-3,
            "adamw_wd": 0.1,
            "weight_decay": 0.05,
            "weight_decouple": False,
        },
    ),
    Case("no_clip", _MUONCLIP, {"adamw_betas": [0.8, 0.99], "adamw_eps": 1e-8, "ns_steps": 6}),
]
