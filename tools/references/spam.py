"""References of gradtx/_algorithms/spam.py and stable_spam.py: pytorch-optimizer's `SPAM` and `StableSPAM`.

The non-default cases make every mode happen within the 20 steps: momentum resets every few steps with
their cosine warmup (`update_proj_gap`, `warmup_epoch`), spike clipping that bites (a small `threshold`,
`grad_accu_steps`), StableSPAM's cosine-decayed betas (`t_max`, `eta_min`), `gamma1 = -1` and the
decoupled weight decay.
"""

from tools.references import Case

CASES = [
    Case("default", "pytorch_optimizer.SPAM", {}),
    Case(
        "reset",
        "pytorch_optimizer.SPAM",
        {
            "lr": 0.01,
            "betas": [0.8, 0.99],
            "update_proj_gap": 6,
            "warmup_epoch": 4,
            "grad_accu_steps": 2,
            "threshold": 2,
            "weight_decay": 0.1,
        },
    ),
    Case(
        "clip", "pytorch_optimizer.SPAM", {"lr": 0.005, "threshold": 1.5, "grad_accu_steps": 3, "eps": 1e-8}
    ),
    Case("stable_default", "pytorch_optimizer.StableSPAM", {}),
    Case(
        "stable_t_max",
        "pytorch_optimizer.StableSPAM",
        {"lr": 0.01, "t_max": 15, "eta_min": 0.3, "update_proj_gap": 7, "weight_decay": 0.1},
    ),
    Case(
        "stable_gammas",
        "pytorch_optimizer.StableSPAM",
        {"lr": 0.005, "betas": [0.8, 0.99], "gamma1": -1.0, "gamma2": 0.8, "theta": 0.9, "eps": 1e-6},
    ),
]
