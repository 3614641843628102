"""The rest of optax.contrib: complex parameters split in two (`split_real_and_imaginary`), GaLore's
low-rank projection and any optimizer made schedule-free (`Entry.reference` names the optax function).

Each densifies a row-sparse gradient: GaLore projects whole matrices, the split wrapper hands its inner
transform dense real parts, and a schedule-free step moves every row of the params.
"""

from __future__ import annotations

from gradtx import combinators, optimizers
from gradtx._algorithms import galore as _galore
from tests.catalog._entries import optimizer, transform, wrapper

OPTAX_CONTRIB = "optax.contrib"
"""The module of optax's contributed optimizers, for `Entry.reference`."""


wrapper(
    "split_real_and_imaginary",
    combinators.split_real_and_imaginary,
    {"inner": optimizers.momentum(0.05, 0.9)},
    sparse="dense",
)
optimizer(
    "galore",
    optimizers.galore,
    ("GaLore",),
    {"learning_rate": 0.05, "rank": 2, "update_proj_gap": 2},
    f"{OPTAX_CONTRIB}.galore",
    sparse="dense",
)
transform("scale_by_galore", _galore.scale_by_galore, {"rank": 2, "update_proj_gap": 2}, sparse="dense")
wrapper(
    "schedule_free",
    optimizers.schedule_free,
    {"tx": optimizers.sgd(0.1), "learning_rate": 0.1},
    sparse="dense",
)
