"""`optax.contrib` under `gradtx.optax_compat`: optax's contributed optimizers with optax's numbers.

Every name is a gradtx rule (or a chain, a wrapper) under optax's signature and state class,
defined in one of optax_compat's alias modules (`_MODULES`) and tested beside optax there;
this module gives them optax's address, so `optax.contrib.prodigy(...)` keeps working after
`import gradtx.optax_compat as optax`. A name optax has here and optax_compat lacks raises
AttributeError saying so.
"""

from __future__ import annotations

import importlib
from typing import Any

_OPTAX_NAMES = (
    "COCOBState",
    "DAdaptAdamWState",
    "DifferentiallyPrivateAggregateState",
    "DoGState",
    "DoWGState",
    "GaLoreDimensionNumbers",
    "GaLoreState",
    "HutchinsonState",
    "MadgradState",
    "MechanicState",
    "MomoAdamState",
    "MomoState",
    "MuonDimensionNumbers",
    "MuonState",
    "NormalizeState",
    "ProdigyState",
    "ReduceLROnPlateauState",
    "SAMState",
    "ScaleByAdemamixState",
    "ScaleBySimplifiedAdEMAMixState",
    "ScheduleFreeState",
    "SophiaState",
    "SplitRealAndImaginaryState",
    "acprop",
    "ademamix",
    "adopt",
    "cocob",
    "dadapt_adamw",
    "differentially_private_aggregate",
    "dog",
    "dowg",
    "dpsgd",
    "galore",
    "hutchinson_estimator_diag_hessian",
    "madgrad",
    "mechanize",
    "momo",
    "momo_adam",
    "muon",
    "normalize",
    "prodigy",
    "reduce_on_plateau",
    "sam",
    "scale_by_acprop",
    "scale_by_ademamix",
    "scale_by_adopt",
    "scale_by_cocob",
    "scale_by_galore",
    "scale_by_madgrad",
    "scale_by_muon",
    "scale_by_simplified_ademamix",
    "schedule_free",
    "schedule_free_adamw",
    "schedule_free_eval_params",
    "schedule_free_sgd",
    "simplified_ademamix",
    "sophia",
    "split_real_and_imaginary",
)
"""`optax.contrib`'s public names (optax 0.2.8)."""

_MODULES = (
    "gradtx.optax_compat._aliases_contrib",
    "gradtx.optax_compat._aliases_muon",
    "gradtx.optax_compat._aliases_modern",
    "gradtx.optax_compat._contrib_more",
    "gradtx.optax_compat._lr_free",
    "gradtx.optax_compat._lr_free_distance",
    "gradtx.optax_compat._stateful",
)
"""optax_compat's modules that define `optax.contrib` names, searched in this order."""


def _find() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for module in map(importlib.import_module, _MODULES):
        for name in _OPTAX_NAMES:
            if name not in found and hasattr(module, name):
                found[name] = getattr(module, name)
    return found


_FOUND = _find()
globals().update(_FOUND)

__all__ = sorted(_FOUND, key=str.lower)


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"`gradtx.optax_compat.contrib` has no `{name}`: it is not a name of `optax.contrib`, or gradtx "
        "does not give optax's numbers under it yet (the names it has: its `__all__`)."
    )
