"""optax's names, signatures, defaults and state layouts, with optax's numbers, built from gradtx.

`import gradtx.optax_compat as optax` turns an optax program into a gradtx one that
computes the same numbers. Where a top-level gradtx name keeps TF's convention
(`gradtx.adam` is TF's epsilon-hat Adam, `gradtx.adamw` contrib's AdamW, whose decay is
not scaled by the rate), the name here is optax's: `optax_compat.adam` is optax's Adam.

The module is a generated mirror: `_table.py` (and `_table_contrib.py` for `optax.contrib`)
say which gradtx factory, or which chain of them, each optax name is; `_mirror.py` gives it
optax's signature (generated from optax by tools/optax_signatures.py), optax's state classes
(the gradtx rule's state renamed, at no cost per step) and a docstring written from gradtx's.
Hand-written code remains where optax's behaviour differs: `inject_hyperparams`'s dtype rule,
`masked`'s `MaskedNode`, the routing states, `MultiSteps`, optax's schedules. Names that are
gradtx's own (`chain`, `scale`, `clip`, ...) are the same objects. The tests compare every name
with optax itself. A name optax has and this module lacks raises AttributeError saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradtx import numerics as _numerics
from gradtx import tree
from gradtx._core import protocol as _protocol
from gradtx._core import updates as _updates
from gradtx.optax_compat import (
    _inject,
    _masked,
    _multi_steps,
    _routing,
    _table,
    _transforms_more,
    _utilities,
    projections,
    schedules,
    second_order,
)
from gradtx.optax_compat._mirror import MODULE

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


def _gradtx_names() -> dict[str, Any]:
    import gradtx

    same = {name: getattr(gradtx, name) for name in _SAME}
    same.update(
        {  # optax's other names of gradtx's objects
            "AdaptiveGradClipState": _protocol.EmptyState,
            "AddDecayedWeightsState": _protocol.EmptyState,
            "ClipByGlobalNormState": _protocol.EmptyState,
            "ClipState": _protocol.EmptyState,
            "NonNegativeParamsState": _protocol.EmptyState,
            "ScaleState": _protocol.EmptyState,
            "ScaleByTrustRatioState": _protocol.EmptyState,
            "GradientTransformationExtraArgs": _protocol.GradientTransformation,
            "TransformInitFn": _protocol.TransformInitFn,
            "TransformUpdateFn": _protocol.TransformUpdateFn,
            "TransformUpdateExtraArgsFn": _protocol.TransformUpdateFn,
            "apply_updates": _updates.apply_updates,
            "incremental_update": _updates.incremental_update,
            "periodic_update": _updates.periodic_update,
            "tree": tree,
            "bias_correction": tree.bias_correction,
            "update_moment": tree.update_moment,
            "update_infinity_moment": tree.update_infinity_moment,
            "update_moment_per_elem_norm": tree.update_moment_per_elem_norm,
            "tree_map_params": tree.map_params,
            **{
                n: getattr(_numerics, n)
                for n in ("multi_normal", "safe_increment", "safe_norm", "scale_gradient")
            },
            "safe_int32_increment": _numerics.safe_increment,
            "safe_root_mean_squares": _numerics.safe_root_mean_squares,
            **{n: getattr(gradtx.linalg, n) for n in ("nnls", "power_iteration")},
        }
    )
    return same


def _public(module: Any) -> dict[str, Any]:
    """The names a mirror or hand-written module defines for optax (made here, not imported there)."""
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) in (MODULE, module.__name__)
    }


_HAND_WRITTEN = {
    _inject: "InjectHyperparamsState InjectStatefulHyperparamsState WrappedSchedule inject_hyperparams "
    "inject_stateful_hyperparams",
    _masked: "MaskedNode masked",
    _multi_steps: "MultiSteps MultiStepsState",
    _routing: "ConditionallyMaskState ConditionallyTransformState MultiTransformState PartitionState "
    "conditionally_mask conditionally_transform flatten freeze init_empty_state multi_transform partition "
    "selective_transform stateless_with_tree_map",
    _transforms_more: "MonitorState measure_with_ema monitor",
    _utilities: "ApplyEvery LookaheadParams LookaheadState apply_every lookahead matrix_inverse_pth_root",
    schedules: "constant_schedule cosine_decay_schedule cosine_onecycle_schedule exponential_decay "
    "join_schedules "
    "linear_onecycle_schedule linear_schedule piecewise_constant_schedule piecewise_interpolate_schedule "
    "polynomial_schedule sgdr_schedule warmup_constant_schedule warmup_cosine_decay_schedule "
    "warmup_exponential_decay_schedule",
}
"""Where optax's behaviour differs from gradtx's (or optax has no gradtx counterpart): the names each module
writes by hand."""

_NAMES = {
    **_gradtx_names(),
    **_public(_table),
    **{n: getattr(m, n) for m, names in _HAND_WRITTEN.items() for n in names.split()},
    "projections": projections,
    "schedules": schedules,
    "second_order": second_order,
}
for _name in (
    "OptimisticState",
    "WeightDecaySchedule",
    "ScaleByRmsWithCountState",
    "ScaleByRStdDevWithCountState",
):
    _NAMES.pop(_name, None)  # states only of a chain member, or optax's unexported names
globals().update(_NAMES)

MaskOrFn = Any | Callable[[Any], Any]
"""optax's type of a mask: a tree of bools (or a prefix of the params' tree), or a function of the params."""
ShouldSkipUpdateFunction = Callable[[Any, Any, Any], tuple[Any, Any]]
"""optax's type of `MultiSteps`' `should_skip_update_fn(updates, gradient_step, params) -> (skip, info)`."""

__all__: list[str] = sorted([*_NAMES, "MaskOrFn", "ShouldSkipUpdateFunction", "contrib", "transforms"])


def _is_optax_loss(name: str) -> bool:
    """Whether `optax.<name>` is one of optax's losses (read from optax when it is installed)."""
    try:
        import optax.losses
    except ImportError:
        return False
    return not name.startswith("_") and name in dir(optax.losses)


def __getattr__(name: str) -> Any:
    if name in ("contrib", "transforms"):  # imported on first use: they read this module's names
        import importlib

        return importlib.import_module(f"gradtx.optax_compat.{name}")
    if name == "losses" or _is_optax_loss(name):
        where = "optax.losses" if name == "losses" else f"optax.losses.{name}"
        raise AttributeError(
            f"`gradtx.optax_compat` has no `{name}`: optax's losses are not optimizers and gradtx has none; "
            f"take them from optax itself (`import optax` beside this module: `{where}`)."
        )
    raise AttributeError(
        f"`gradtx.optax_compat` has no `{name}`: it is not an optax name, or gradtx does not give "
        "optax's numbers under it yet (the names it has: `gradtx.optax_compat.__all__`)."
    )
