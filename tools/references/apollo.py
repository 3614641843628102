"""References of gradtx/_algorithms/apollo.py: pytorch-optimizer's `APOLLO`.

`APOLLO(params, rank=..., update_proj_gap=..., scale=..., projection_type=...)` puts the projection's
arguments on the parameter group: every 2-D parameter (the problem's `matrix`, 8 x 5) is projected.
The random matrices it draws (`torch.randn`: at each renewal one (8, r) and one (r, 5), of which a matrix
with more rows than columns uses the second) are recorded and replayed by the test.
"""

from tools.references import Case

_APOLLO = "pytorch_optimizer.APOLLO"
_RANDN = ("torch.randn",)

CASES = [
    Case("default", _APOLLO, {}),
    Case(
        "tensor",
        _APOLLO,
        {
            "lr": 0.01,
            "rank": 2,
            "update_proj_gap": 5,
            "scale": 1.0,
            "projection_type": "std",
            "weight_decay": 0.1,
        },
        capture=_RANDN,
    ),
    Case(
        "channel_coupled",
        _APOLLO,
        {
            "lr": 0.005,
            "betas": (0.8, 0.99),
            "rank": 3,
            "update_proj_gap": 7,
            "scale": 0.5,
            "projection_type": "random",
            "scale_type": "channel",
            "weight_decay": 0.05,
            "weight_decouple": False,
        },
        capture=_RANDN,
    ),
    Case(
        "fixed_decay_uncorrected",
        _APOLLO,
        {
            "lr": 0.01,
            "rank": 1,
            "update_proj_gap": 4,
            "scale": 2.0,
            "projection_type": "std",
            "correct_bias": False,
            "weight_decay": 0.01,
            "fixed_decay": True,
            "eps": 1e-4,
        },
        capture=_RANDN,
    ),
]
