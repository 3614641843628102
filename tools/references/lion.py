"""References of gradtx/_algorithms/lion.py: pytorch-optimizer's `Tiger`."""

from tools.references import Case

CASES = [
    Case("default", "pytorch_optimizer.Tiger", {}),
    Case("beta", "pytorch_optimizer.Tiger", {"lr": 0.01, "beta": 0.9, "weight_decay": 0.1}),
    Case("coupled", "pytorch_optimizer.Tiger", {"lr": 0.003, "weight_decay": 0.05, "weight_decouple": False}),
    Case("fixed_decay", "pytorch_optimizer.Tiger", {"lr": 0.003, "weight_decay": 0.02, "fixed_decay": True}),
]
