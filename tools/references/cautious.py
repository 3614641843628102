"""References of gradtx/_algorithms/cautious.py: pytorch-optimizer's `cautious=True` on its `Lion` (C-Lion)
and on `AdEMAMix` with `alpha=0` (C-AdamW: the slow momentum weighs nothing, the rest is AdamW)."""

from tools.references import Case

LION = "pytorch_optimizer.Lion"
ADEMAMIX = "pytorch_optimizer.AdEMAMix"

CASES = [
    Case("lion", LION, {"lr": 0.003, "cautious": True}),
    Case("lion_decay", LION, {"lr": 0.003, "betas": [0.95, 0.98], "weight_decay": 0.1, "cautious": True}),
    Case(
        "lion_coupled", LION, {"lr": 0.003, "weight_decay": 0.05, "weight_decouple": False, "cautious": True}
    ),
    Case(
        "adamw",
        ADEMAMIX,
        {"lr": 0.01, "alpha": 0.0, "weight_decay": 0.01, "weight_decouple": True, "cautious": True},
    ),
    Case(
        "adamw_fixed",
        ADEMAMIX,
        {
            "lr": 0.02,
            "betas": [0.8, 0.99, 0.9999],
            "alpha": 0.0,
            "eps": 1e-6,
            "weight_decay": 0.1,
            "weight_decouple": True,
            "fixed_decay": True,
            "cautious": True,
        },
    ),
    Case("adam_l2", ADEMAMIX, {"lr": 0.01, "alpha": 0.0, "weight_decay": 0.05, "cautious": True}),
]
