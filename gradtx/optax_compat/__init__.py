"""optax's names, signatures, defaults and state layouts, with optax's numbers, built from gradtx.

`import gradtx.optax_compat as optax` turns an optax program into a gradtx one that
computes the same numbers. Where a top-level gradtx name keeps TF's convention
(`gradtx.adam` is TF's epsilon-hat Adam, `gradtx.adamw` contrib's AdamW, whose decay is
not scaled by the rate), the name here is optax's: `optax_compat.adam` is optax's Adam.
Every optimizer and building block here is a gradtx rule given optax's state class, or a
chain of them as optax builds it, so states read as optax's (`state[0].mu`) and the tests
compare 20 steps of each with optax itself, eagerly and jitted. A name optax has and this
module lacks raises AttributeError saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradtx import (
    ApplyIfFiniteState,
    EmaState,
    EmptyState,
    GradientTransformation,
    OptState,
    Params,
    ScalarOrSchedule,
    ScaleByScheduleState,
    Schedule,
    Updates,
    ZeroNansState,
    adaptive_grad_clip,
    apply_updates,
    chain,
    clip,
    clip_by_block_rms,
    identity,
    keep_params_nonnegative,
    named_chain,
    per_example_global_norm_clip,
    scale,
    scale_by_param_block_rms,
    scale_by_schedule,
    scale_by_sign,
    scale_by_trust_ratio,
    set_to_zero,
    skip_large_updates,
    skip_not_finite,
    stateless,
    tree,
    with_extra_args_support,
    zero_nans,
)
from gradtx._core import protocol as _protocol
from gradtx.optax_compat import projections, schedules, second_order
from gradtx.optax_compat._aliases import (
    adadelta,
    adafactor,
    adagrad,
    lars,
    lion,
    novograd,
    rmsprop,
    rprop,
    sgd,
    sign_sgd,
    signum,
    sm3,
)
from gradtx.optax_compat._aliases_adam import (
    adabelief,
    adam,
    adamax,
    adamaxw,
    adamw,
    adan,
    amsgrad,
    lamb,
    nadam,
    nadamw,
    radam,
    yogi,
)
from gradtx.optax_compat._aliases_modern_more import (
    AddNoiseState,
    add_noise,
    fromage,
    noisy_sgd,
    optimistic_adam,
    optimistic_adam_v2,
    optimistic_gradient_descent,
    scale_by_optimistic_gradient,
)
from gradtx.optax_compat._combinators import (
    add_decayed_weights,
    apply_if_finite,
    global_norm,
)
from gradtx.optax_compat._inject import (
    InjectHyperparamsState,
    InjectStatefulHyperparamsState,
    WrappedSchedule,
    inject_hyperparams,
    inject_stateful_hyperparams,
)
from gradtx.optax_compat._lbfgs import (
    ScaleByBacktrackingLinesearchState,
    ScaleByLBFGSState,
    ScaleByZoomLinesearchState,
    ZoomLinesearchInfo,
    lbfgs,
    scale_by_backtracking_linesearch,
    scale_by_lbfgs,
    scale_by_zoom_linesearch,
    value_and_grad_from_state,
)
from gradtx.optax_compat._lr_free_distance import (
    polyak_sgd,
    scale_by_distance_over_gradients,
    scale_by_polyak,
)
from gradtx.optax_compat._masked import MaskedNode, MaskedState, masked
from gradtx.optax_compat._multi_steps import MultiSteps, MultiStepsState
from gradtx.optax_compat._routing import (
    AdaptiveGradClipState,
    AddDecayedWeightsState,
    ClipByGlobalNormState,
    ClipState,
    ConditionallyMaskState,
    ConditionallyTransformState,
    MultiTransformState,
    NonNegativeParamsState,
    PartitionState,
    ScaleByTrustRatioState,
    ScaleState,
    conditionally_mask,
    conditionally_transform,
    flatten,
    freeze,
    init_empty_state,
    multi_transform,
    partition,
    selective_transform,
    stateless_with_tree_map,
)
from gradtx.optax_compat._scalings import (
    clip_by_global_norm,
    ema,
    scale_by_adadelta,
    scale_by_factored_rms,
    scale_by_learning_rate,
    scale_by_rms,
    scale_by_rprop,
    scale_by_rss,
    scale_by_sm3,
    scale_by_stddev,
    trace,
)
from gradtx.optax_compat._states import (
    FactoredState,
    ScaleByAdaDeltaState,
    ScaleByAdamState,
    ScaleByAdanState,
    ScaleByAmsgradState,
    ScaleByBeliefState,
    ScaleByLionState,
    ScaleByNovogradState,
    ScaleByRmsState,
    ScaleByRpropState,
    ScaleByRssState,
    ScaleByRStdDevState,
    ScaleBySM3State,
    TraceState,
)
from gradtx.optax_compat._transforms import (
    scale_by_adam,
    scale_by_adamax,
    scale_by_adan,
    scale_by_amsgrad,
    scale_by_belief,
    scale_by_lion,
    scale_by_novograd,
    scale_by_radam,
    scale_by_yogi,
)
from gradtx.optax_compat._transforms_more import (
    MonitorState,
    SnapshotState,
    centralize,
    incremental_update,
    measure_with_ema,
    microbatch,
    monitor,
    normalize_by_update_norm,
    per_example_layer_norm_clip,
    periodic_update,
    scale_by_param_block_norm,
    snapshot,
)
from gradtx.optax_compat._utilities import (
    ApplyEvery,
    LookaheadParams,
    LookaheadState,
    apply_every,
    lookahead,
    matrix_inverse_pth_root,
    multi_normal,
    nnls,
    power_iteration,
    safe_increment,
    safe_int32_increment,
    safe_norm,
    safe_root_mean_squares,
    scale_gradient,
)
from gradtx.optax_compat.schedules import (
    constant_schedule,
    cosine_decay_schedule,
    cosine_onecycle_schedule,
    exponential_decay,
    join_schedules,
    linear_onecycle_schedule,
    linear_schedule,
    piecewise_constant_schedule,
    piecewise_interpolate_schedule,
    polynomial_schedule,
    sgdr_schedule,
    warmup_constant_schedule,
    warmup_cosine_decay_schedule,
    warmup_exponential_decay_schedule,
)

# optax's top-level names of `optax.tree` functions (the same objects in optax)
bias_correction = tree.bias_correction
update_moment = tree.update_moment
update_infinity_moment = tree.update_infinity_moment
update_moment_per_elem_norm = tree.update_moment_per_elem_norm
tree_map_params = tree.map_params

TransformInitFn = _protocol.TransformInitFn
TransformUpdateFn = _protocol.TransformUpdateFn
TransformUpdateExtraArgsFn = _protocol.TransformUpdateFn
"""optax's type of an `update` that takes extra keyword arguments: every gradtx `update` does."""
MaskOrFn = Any | Callable[[Any], Any]
"""optax's type of a mask: a tree of bools (or a prefix of the params' tree), or a function of the params."""
ShouldSkipUpdateFunction = Callable[[Any, Any, Any], tuple[Any, Any]]
"""optax's type of `MultiSteps`' `should_skip_update_fn(updates, gradient_step, params) -> (skip, info)`."""

GradientTransformationExtraArgs = GradientTransformation
"""optax's name for a transform whose `update` takes extra keyword arguments: every gradtx transform."""

__all__: list[str] = [
    "AddNoiseState",
    "add_noise",
    "flatten",
    "contrib",
    "ApplyEvery",
    "LookaheadParams",
    "LookaheadState",
    "apply_every",
    "lookahead",
    "matrix_inverse_pth_root",
    "multi_normal",
    "nnls",
    "power_iteration",
    "safe_increment",
    "safe_int32_increment",
    "safe_norm",
    "safe_root_mean_squares",
    "scale_gradient",
    "bias_correction",
    "update_moment",
    "update_infinity_moment",
    "update_moment_per_elem_norm",
    "tree_map_params",
    "MaskOrFn",
    "ShouldSkipUpdateFunction",
    "TransformInitFn",
    "TransformUpdateExtraArgsFn",
    "TransformUpdateFn",
    "transforms",
    "AdaptiveGradClipState",
    "AddDecayedWeightsState",
    "ClipByGlobalNormState",
    "ClipState",
    "ConditionallyMaskState",
    "ConditionallyTransformState",
    "MultiTransformState",
    "NonNegativeParamsState",
    "PartitionState",
    "ScaleByTrustRatioState",
    "ScaleState",
    "conditionally_mask",
    "conditionally_transform",
    "freeze",
    "fromage",
    "init_empty_state",
    "multi_transform",
    "partition",
    "selective_transform",
    "stateless_with_tree_map",
    "ApplyIfFiniteState",
    "ZeroNansState",
    "adaptive_grad_clip",
    "keep_params_nonnegative",
    "per_example_global_norm_clip",
    "EmaState",
    "EmptyState",
    "FactoredState",
    "GradientTransformation",
    "GradientTransformationExtraArgs",
    "InjectHyperparamsState",
    "InjectStatefulHyperparamsState",
    "MaskedNode",
    "MaskedState",
    "MonitorState",
    "MultiSteps",
    "MultiStepsState",
    "OptState",
    "Params",
    "ScalarOrSchedule",
    "ScaleByAdaDeltaState",
    "ScaleByAdamState",
    "ScaleByAdanState",
    "ScaleByAmsgradState",
    "ScaleByBeliefState",
    "ScaleByBacktrackingLinesearchState",
    "ScaleByLionState",
    "ScaleByLBFGSState",
    "ScaleByNovogradState",
    "ScaleByRStdDevState",
    "ScaleByRmsState",
    "ScaleByRpropState",
    "ScaleByRssState",
    "ScaleBySM3State",
    "ScaleByScheduleState",
    "ScaleByZoomLinesearchState",
    "Schedule",
    "SnapshotState",
    "TraceState",
    "Updates",
    "WrappedSchedule",
    "ZoomLinesearchInfo",
    "adabelief",
    "adadelta",
    "adafactor",
    "adagrad",
    "adam",
    "adamax",
    "adamaxw",
    "adamw",
    "adan",
    "add_decayed_weights",
    "amsgrad",
    "apply_if_finite",
    "apply_updates",
    "centralize",
    "chain",
    "clip",
    "clip_by_block_rms",
    "clip_by_global_norm",
    "constant_schedule",
    "cosine_decay_schedule",
    "cosine_onecycle_schedule",
    "ema",
    "exponential_decay",
    "global_norm",
    "identity",
    "incremental_update",
    "inject_hyperparams",
    "inject_stateful_hyperparams",
    "join_schedules",
    "lamb",
    "lars",
    "lbfgs",
    "linear_onecycle_schedule",
    "linear_schedule",
    "lion",
    "masked",
    "measure_with_ema",
    "microbatch",
    "monitor",
    "nadam",
    "nadamw",
    "named_chain",
    "normalize_by_update_norm",
    "noisy_sgd",
    "novograd",
    "optimistic_adam",
    "optimistic_adam_v2",
    "optimistic_gradient_descent",
    "per_example_layer_norm_clip",
    "periodic_update",
    "piecewise_constant_schedule",
    "piecewise_interpolate_schedule",
    "polyak_sgd",
    "polynomial_schedule",
    "projections",
    "radam",
    "rmsprop",
    "rprop",
    "scale",
    "scale_by_adadelta",
    "scale_by_adam",
    "scale_by_adamax",
    "scale_by_adan",
    "scale_by_amsgrad",
    "scale_by_belief",
    "scale_by_backtracking_linesearch",
    "scale_by_factored_rms",
    "scale_by_distance_over_gradients",
    "scale_by_learning_rate",
    "scale_by_lbfgs",
    "scale_by_lion",
    "scale_by_novograd",
    "scale_by_optimistic_gradient",
    "scale_by_param_block_norm",
    "scale_by_param_block_rms",
    "scale_by_polyak",
    "scale_by_radam",
    "scale_by_rms",
    "scale_by_rprop",
    "scale_by_rss",
    "scale_by_schedule",
    "scale_by_sign",
    "scale_by_sm3",
    "scale_by_stddev",
    "scale_by_trust_ratio",
    "scale_by_yogi",
    "scale_by_zoom_linesearch",
    "schedules",
    "second_order",
    "set_to_zero",
    "sgd",
    "sgdr_schedule",
    "sign_sgd",
    "signum",
    "skip_large_updates",
    "skip_not_finite",
    "sm3",
    "snapshot",
    "stateless",
    "trace",
    "tree",
    "value_and_grad_from_state",
    "warmup_constant_schedule",
    "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
    "with_extra_args_support",
    "yogi",
    "zero_nans",
]


def _is_optax_loss(name: str) -> bool:
    """Whether `optax.<name>` is one of optax's losses (read from optax when it is installed)."""
    try:
        import optax.losses
    except ImportError:
        return False
    return not name.startswith("_") and name in dir(optax.losses)


def __getattr__(name: str) -> Any:
    if name == "contrib":  # imported on first use: it gathers optax.contrib's names from the alias modules
        import importlib

        return importlib.import_module("gradtx.optax_compat.contrib")
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


from gradtx.optax_compat import transforms  # noqa: E402  (last: it reads this module's `__all__`)
