"""Frontier optimizers (spam): SPAM, StableSPAM, schedule-free RAdam (pytorch-optimizer's numbers;
`Entry.reference` names its class). The SPAM examples reset the momentum within a few steps, so the
contract suite runs the resets too."""

from __future__ import annotations

from gradtx import optimizers, transforms
from tests.catalog._entries import optimizer, transform

optimizer(
    "spam",
    optimizers.spam,
    (),
    {
        "learning_rate": 0.01,
        "update_proj_gap": 3,
        "warmup_epoch": 2,
        "grad_accu_steps": 1,
        "threshold": 2.0,
        "weight_decay": 0.1,
    },
    "pytorch_optimizer.SPAM",
    sparse="dense",
)
optimizer(
    "stable_spam",
    optimizers.stable_spam,
    (),
    {"learning_rate": 0.01, "t_max": 4, "update_proj_gap": 3, "weight_decay": 0.1},
    "pytorch_optimizer.StableSPAM",
    sparse="dense",
)
transform(
    "scale_by_stable_spam",
    transforms.scale_by_stable_spam,
    {"t_max": 4, "update_proj_gap": 3},
    sparse="dense",
)
optimizer(
    "schedule_free_radam",
    optimizers.schedule_free_radam,
    (),
    {"learning_rate": 0.1, "weight_decay": 0.01, "r": 0.5},
    "pytorch_optimizer.ScheduleFreeRAdam",
    sparse="dense",
)
