"""References of gradtx/_algorithms/schedule_free_radam.py: pytorch-optimizer's `ScheduleFreeRAdam`.

Its params are the training iterate `y` (the optimizer is in train mode throughout), as gradtx's params
are. The cases cover the defaults (a silent first phase while RAdam's rho_t <= 4), the polynomial and
rate weighting of the average (`r`, `weight_lr_power`) with weight decay, and the SGD steps at rate 1 of
a non-silent first phase.
"""

from tools.references import Case

_PATH = "pytorch_optimizer.ScheduleFreeRAdam"

CASES = [
    Case("default", _PATH, {}),
    Case(
        "weighting",
        _PATH,
        {"lr": 0.01, "betas": [0.95, 0.99], "weight_decay": 0.05, "r": 1.0, "weight_lr_power": 1.0},
    ),
    Case("loud", _PATH, {"lr": 0.005, "betas": [0.8, 0.99], "silent_sgd_phase": False, "eps": 1e-6}),
]
