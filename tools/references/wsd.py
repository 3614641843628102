"""References of gradtx/schedules/_wsd.py: pytorch-optimizer's `get_wsd_schedule` (a `LambdaLR` factory).

Each case builds the scheduler on an SGD optimizer at rate 1 and records the rate it sets for each of
`steps` optimizer steps (`<label>/values`, the multipliers, from the construction's value on), one case
per decay type, with and without a warmup or stable phase, past the end of the decay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tools.references import Case

_PATH = "pytorch_optimizer.get_wsd_schedule"
STEPS = 100

CASES = [
    Case(
        "1-sqrt",
        _PATH,
        {"num_warmup_steps": 10, "num_stable_steps": 40, "num_decay_steps": 30, "min_lr_ratio": 0.1},
        steps=STEPS,
    ),
    Case(
        "cosine",
        _PATH,
        {
            "num_warmup_steps": 5,
            "num_stable_steps": 20,
            "num_decay_steps": 60,
            "min_lr_ratio": 0.05,
            "cooldown_type": "cosine",
        },
        steps=STEPS,
    ),
    Case(
        "cosine_cycles",
        _PATH,
        {
            "num_warmup_steps": 0,
            "num_stable_steps": 10,
            "num_decay_steps": 50,
            "num_cycles": 1.0,
            "min_lr_ratio": 0.2,
            "cooldown_type": "cosine",
        },  # fmt: skip
        steps=STEPS,
    ),
    Case(
        "linear",
        _PATH,
        {"num_warmup_steps": 20, "num_stable_steps": 0, "num_decay_steps": 70, "cooldown_type": "linear"},
        steps=STEPS,
    ),
    Case(
        "1-square",
        _PATH,
        {
            "num_warmup_steps": 3,
            "num_stable_steps": 30,
            "num_decay_steps": 40,
            "min_lr_ratio": 0.2,
            "cooldown_type": "1-square",
        },  # fmt: skip
        steps=STEPS,
    ),
]


def run(case: Case, prob: dict[str, Any]) -> dict[str, np.ndarray]:
    """The rate (the multiplier: the base rate is 1) the scheduler gives each of the case's steps."""
    del prob
    import torch
    from pytorch_optimizer import get_wsd_schedule

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = get_wsd_schedule(opt, **case.kwargs)
    values = []
    for _ in range(case.steps):
        values.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    return {f"{case.label}/values": np.asarray(values, np.float64)}
