"""Transforms of transforms: composition, routing, pre- and post-processing; no update rule of their own."""

from gradtx.combinators._accumulate import (
    AccumulateGradientsState,
    ApplyIfFiniteState,
    accumulate_gradients,
    apply_if_finite,
    has_updated,
    skip_large_updates,
    skip_not_finite,
)
from gradtx.combinators._chain import chain, named_chain
from gradtx.combinators._clip import ClipByGlobalNormState, ClipState, clip, clip_by_global_norm, clip_by_norm
from gradtx.combinators._conditional import (
    ConditionallyMaskState,
    ConditionallyTransformState,
    conditionally_mask,
    conditionally_transform,
)
from gradtx.combinators._gradients import (
    AddNoiseState,
    ScaleGradientsState,
    add_noise,
    scale_gradients,
    transform_gradients,
)
from gradtx.combinators._inject import InjectHyperparamsState, inject_hyperparams
from gradtx.combinators._lookahead import LookaheadState, lookahead, slow_params
from gradtx.combinators._masking import MaskedState, freeze, masked, partition
from gradtx.combinators._moving_average import (
    MovingAverageState,
    averaged_params,
    moving_average,
    swap_averaged,
)
from gradtx.combinators._norm_clip import adaptive_grad_clip, global_norm
from gradtx.combinators._privacy import differentially_private_aggregate, per_example_global_norm_clip
from gradtx.combinators._stateless import identity, stateless
from gradtx.combinators._variable_clipping import ClipVariablesState, clip_variables
from gradtx.combinators._weight_decay import (
    AddDecayedWeightsState,
    DecoupledWeightDecayState,
    add_decayed_weights,
    decoupled_weight_decay,
)
from gradtx.combinators._zeroing import ZeroNansState, keep_params_nonnegative, set_to_zero, zero_nans

__all__ = [
    "AccumulateGradientsState",
    "AddDecayedWeightsState",
    "AddNoiseState",
    "ApplyIfFiniteState",
    "ClipByGlobalNormState",
    "ClipState",
    "ClipVariablesState",
    "ConditionallyMaskState",
    "ConditionallyTransformState",
    "DecoupledWeightDecayState",
    "InjectHyperparamsState",
    "LookaheadState",
    "MaskedState",
    "MovingAverageState",
    "ScaleGradientsState",
    "ZeroNansState",
    "accumulate_gradients",
    "adaptive_grad_clip",
    "add_decayed_weights",
    "add_noise",
    "apply_if_finite",
    "averaged_params",
    "chain",
    "clip",
    "clip_by_global_norm",
    "clip_by_norm",
    "clip_variables",
    "conditionally_mask",
    "conditionally_transform",
    "decoupled_weight_decay",
    "differentially_private_aggregate",
    "freeze",
    "global_norm",
    "has_updated",
    "identity",
    "inject_hyperparams",
    "keep_params_nonnegative",
    "lookahead",
    "masked",
    "moving_average",
    "named_chain",
    "partition",
    "per_example_global_norm_clip",
    "scale_gradients",
    "set_to_zero",
    "skip_large_updates",
    "skip_not_finite",
    "slow_params",
    "stateless",
    "swap_averaged",
    "transform_gradients",
    "zero_nans",
]
