"""Transforms of transforms: composition, routing, pre- and post-processing; no update rule of their own."""

from gradtx.combinators._accumulate import (
    AccumulateGradientsState,
    ApplyIfFiniteState,
    accumulate_gradients,
    apply_if_finite,
)
from gradtx.combinators._chain import chain, named_chain
from gradtx.combinators._clip import ClipByGlobalNormState, ClipState, clip, clip_by_global_norm, clip_by_norm
from gradtx.combinators._gradients import (
    AddNoiseState,
    ScaleGradientsState,
    add_noise,
    scale_gradients,
    transform_gradients,
)
from gradtx.combinators._inject import InjectHyperparamsState, inject_hyperparams
from gradtx.combinators._masking import MaskedState, freeze, masked, partition
from gradtx.combinators._moving_average import (
    MovingAverageState,
    averaged_params,
    moving_average,
    swap_averaged,
)
from gradtx.combinators._stateless import identity, stateless
from gradtx.combinators._variable_clipping import ClipVariablesState, clip_variables
from gradtx.combinators._weight_decay import (
    AddDecayedWeightsState,
    DecoupledWeightDecayState,
    add_decayed_weights,
    decoupled_weight_decay,
)

__all__ = [
    "AccumulateGradientsState",
    "AddDecayedWeightsState",
    "AddNoiseState",
    "ApplyIfFiniteState",
    "ClipByGlobalNormState",
    "ClipState",
    "ClipVariablesState",
    "DecoupledWeightDecayState",
    "InjectHyperparamsState",
    "MaskedState",
    "MovingAverageState",
    "ScaleGradientsState",
    "accumulate_gradients",
    "add_decayed_weights",
    "add_noise",
    "apply_if_finite",
    "averaged_params",
    "chain",
    "clip",
    "clip_by_global_norm",
    "clip_by_norm",
    "clip_variables",
    "decoupled_weight_decay",
    "freeze",
    "identity",
    "inject_hyperparams",
    "masked",
    "moving_average",
    "named_chain",
    "partition",
    "scale_gradients",
    "stateless",
    "swap_averaged",
    "transform_gradients",
]
