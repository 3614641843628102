"""optax's names, signatures, defaults and state layouts, with optax's numbers, built from gradtx.

`import gradtx.optax_compat as optax` turns an optax program into a gradtx one that
computes the same numbers. Where a top-level gradtx name keeps TF's convention
(`gradtx.adam` is TF's epsilon-hat Adam, `gradtx.adamw` contrib's AdamW, whose decay is
not scaled by the rate), the name here is optax's: `optax_compat.adam` is optax's Adam.

The module is a generated mirror: `_table.py` and `_table_relaid.py` (and `_table_contrib.py`,
`_table_contrib_matrix.py` and `_table_contrib_schedule_free.py` for `optax.contrib`) say which gradtx
factory, or which chain of them, each optax name is; `_mirror.py` gives it
optax's signature (generated from optax by tools/optax_signatures.py), optax's state classes
(the gradtx rule's state renamed, at no cost per step) and a docstring written from gradtx's.
`_table_schedules.py` holds optax's schedules and `_table_wrappers.py` its wrappers and routing, in
optax's layouts. Hand-written code remains where optax's behaviour differs: `inject_hyperparams`'s
policy (its dtype rule and stateful schedules), `masked`'s `MaskedNode`, `MultiSteps`, `lookahead`'s
params, optax's schedule rounding. Names that are gradtx's own (`chain`, `scale`, `clip`, ...) are the
same objects. Beside the optimizers, the rest of what optax programs touch is at optax's addresses:
its losses (`gradtx.losses`, here and under their top-level names), `tree` and its older spelling
`tree_utils`, `assignment`, `microbatching` and `experimental.aggregating`. The tests compare every
name with optax itself and walk optax's modules for names this one lacks; the one left out
(`perturbations`) raises AttributeError saying why, as does a name optax lacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradtx import losses as _losses
from gradtx import numerics as _numerics
from gradtx._core import protocol as _protocol
from gradtx._core import updates as _updates
from gradtx.optax_compat import (
    _inject,
    _mirror,
    _multi_steps,
    _table,
    _table_relaid,
    _table_schedules,
    _table_wrappers,
    projections,
    schedules,
    second_order,
    tree,
)
from gradtx.optax_compat._mirror import public

_SAME = (
    "ApplyIfFiniteState EmaState EmptyState GradientTransformation MaskedState MonitorState OptState Params "
    "ScalarOrSchedule ScaleByBacktrackingLinesearchState ScaleByLBFGSState ScaleByScheduleState "
    "ScaleByZoomLinesearchState Schedule SnapshotState Updates ZeroNansState ZoomLinesearchInfo "
    "adaptive_grad_clip "
    "centralize chain clip clip_by_block_rms identity keep_params_nonnegative microbatch named_chain "
    "normalize_by_update_norm per_example_global_norm_clip per_example_layer_norm_clip scale "
    "scale_by_param_block_norm scale_by_param_block_rms scale_by_polyak scale_by_schedule scale_by_sign "
    "scale_by_trust_ratio set_to_zero skip_large_updates skip_not_finite snapshot stateless "
    "value_and_grad_from_state with_extra_args_support zero_nans"
).split()
"""gradtx's names that are optax's as they are: the same signature, state and numbers."""


_EMPTY = (
    "AdaptiveGradClipState AddDecayedWeightsState ClipByGlobalNormState ClipState NonNegativeParamsState "
    "ScaleState ScaleByTrustRatioState"
).split()
"""optax's names of stateless transforms' states: `EmptyState`."""


def _gradtx_names() -> dict[str, Any]:
    import gradtx

    modules = {
        _updates: "apply_updates incremental_update periodic_update",
        tree: "bias_correction update_moment update_infinity_moment update_moment_per_elem_norm",
        _numerics: "multi_normal safe_increment safe_norm safe_root_mean_squares scale_gradient",
        gradtx.linalg: "nnls power_iteration",
        gradtx: " ".join(_SAME),
    }
    return {  # and optax's other names of gradtx's objects:
        **{name: getattr(module, name) for module, names in modules.items() for name in names.split()},
        **dict.fromkeys(_EMPTY, _protocol.EmptyState),
        "GradientTransformationExtraArgs": _protocol.GradientTransformation,
        "TransformInitFn": _protocol.TransformInitFn,
        "TransformUpdateFn": _protocol.TransformUpdateFn,
        "TransformUpdateExtraArgsFn": _protocol.TransformUpdateFn,
        "tree": tree,
        "tree_map_params": tree.map_params,
        "safe_int32_increment": _numerics.safe_increment,
    }


_NAMES = {
    **_gradtx_names(),
    **public(_table),
    **public(_table_relaid),
    **public(_table_schedules),
    **public(_table_wrappers),
    **public(_inject),
    **public(_multi_steps),
    "projections": projections,
    "schedules": schedules,
    "second_order": second_order,
    "tree": tree,
}
for _name in (
    "OptimisticState WeightDecaySchedule ScaleByRmsWithCountState ScaleByRStdDevWithCountState "
    "StatefulSchedule WrappedScheduleState"
).split():
    _NAMES.pop(_name, None)  # states only of a chain member, or names optax has in a submodule only
globals().update(_NAMES)

MaskOrFn = Any | Callable[[Any], Any]
"""optax's type of a mask: a tree of bools (or a prefix of the params' tree), or a function of the params."""
ShouldSkipUpdateFunction = Callable[[Any, Any, Any], tuple[Any, Any]]
"""optax's type of `MultiSteps`' `should_skip_update_fn(updates, gradient_step, params) -> (skip, info)`."""

globals().update({name: getattr(_losses, name) for name in _losses.OPTAX_TOP_LEVEL})  # `optax.l2_loss`

_SUBMODULES = ("assignment", "contrib", "experimental", "losses", "microbatching", "transforms", "tree_utils")
"""optax's submodules that are imported on first use (some read this module's names)."""

__all__: list[str] = sorted(
    [*_NAMES, *_losses.OPTAX_TOP_LEVEL, *_SUBMODULES, "MaskOrFn", "ShouldSkipUpdateFunction"]
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"gradtx.optax_compat.{name}")
    raise _mirror.missing("gradtx.optax_compat", name)
