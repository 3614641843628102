"""References of gradtx/_algorithms/soap.py: pytorch-optimizer's `SOAP`.

Besides the trajectories, each case records every `torch.linalg.eigh` the reference calls (once per
preconditioned dimension, at its first step) as draws: the input matrix, then its eigenvectors. Where a
first statistic is rank-deficient (the (8, 5) matrix's 8 x 8 factor from one gradient, a vector's outer
product) the eigenvectors of its null space are LAPACK's arbitrary choice, which changes the trajectory;
tests/algorithms/test_soap.py gives gradtx that choice after checking that both span the same eigenspaces.
The cases without a rank-deficient statistic (`max_precondition_dim` below 8, no `precondition_1d`) are
compared as they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tools.references import Case

SOAP = "pytorch_optimizer.SOAP"

CASES = [
    Case("default", SOAP, {}),
    Case(
        "betas",
        SOAP,
        {
            "lr": 0.01,
            "betas": [0.9, 0.99],
            "shampoo_beta": 0.8,
            "weight_decay": 0.1,
            "precondition_frequency": 3,
        },
    ),
    Case("max_dim", SOAP, {"max_precondition_dim": 7, "precondition_frequency": 4, "betas": [0.9, 0.999]}),
    Case("merged", SOAP, {"merge_dims": True, "max_precondition_dim": 6, "precondition_frequency": 4}),
    Case(
        "channels_last",
        SOAP,
        {
            "merge_dims": True,
            "max_precondition_dim": 6,
            "data_format": "channels_last",
            "precondition_frequency": 5,
            "weight_decay": 0.0,
        },
    ),
    Case("precondition_1d", SOAP, {"precondition_1d": True, "normalize_gradient": True}),
    Case(
        "no_bias_correction",
        SOAP,
        {
            "correct_bias": False,
            "normalize_gradient": True,
            "max_precondition_dim": 7,
            "eps": 1e-6,
            "precondition_frequency": 3,
        },
    ),
]


def run(case: Case, prob: dict[str, Any]) -> dict[str, np.ndarray]:
    """The default torch loop, with each `torch.linalg.eigh`'s input and eigenvectors recorded as draws."""
    import torch

    from tools.record_references import _run_torch

    calls: list[np.ndarray] = []
    original = torch.linalg.eigh

    def eigh(m, *args, **kwargs):
        out = original(m, *args, **kwargs)
        calls.extend([m.detach().numpy().copy(), out.eigenvectors.detach().numpy().copy()])
        return out

    torch.linalg.eigh = eigh
    try:
        out = _run_torch(case, prob)
    finally:
        torch.linalg.eigh = original
    assert not any(k.startswith(f"{case.label}/draws/") for k in out)
    out.update({f"{case.label}/draws/{i}": d for i, d in enumerate(calls)})
    return out
