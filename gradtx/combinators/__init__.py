"""Transforms of transforms: composition, routing, pre- and post-processing; no update rule of their own."""

from gradtx._core.chain import chain, named_chain
from gradtx.combinators._accumulate import (
    AccumulateGradientsState,
    accumulate_gradients,
    has_updated,
    skip_large_updates,
    skip_not_finite,
)
from gradtx.combinators._apply_every import ApplyEveryState, apply_every
from gradtx.combinators._apply_if_finite import ApplyIfFiniteState, apply_if_finite
from gradtx.combinators._clip import ClipByGlobalNormState, ClipState, clip, clip_by_global_norm, clip_by_norm
from gradtx.combinators._complex import (
    SplitRealAndImaginaryArrays,
    SplitRealAndImaginaryState,
    split_real_and_imaginary,
)
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
from gradtx.combinators._loss_scale import LossScaleState, loss_scaled, scale_loss
from gradtx.combinators._low_bit_state import low_bit_state
from gradtx.combinators._masking import MaskedState, freeze, masked, partition
from gradtx.combinators._micro_grad import MicrobatchOutputs, micro_grad, micro_vmap
from gradtx.combinators._microbatch import AccumulationType, Accumulator, microbatch, reshape_batch_axis
from gradtx.combinators._monitor import (
    MeasureEmaState,
    MonitorState,
    SnapshotState,
    measure_with_ema,
    monitor,
    snapshot,
)
from gradtx.combinators._moving_average import (
    MovingAverageState,
    averaged_params,
    moving_average,
    swap_averaged,
)
from gradtx.combinators._norm_clip import adaptive_grad_clip, global_norm
from gradtx.combinators._per_example import per_example_layer_norm_clip
from gradtx.combinators._plateau import ReduceOnPlateauState, reduce_on_plateau
from gradtx.combinators._privacy import (
    DifferentiallyPrivateAggregateState,
    differentially_private_aggregate,
    per_example_global_norm_clip,
)
from gradtx.combinators._stateless import identity, stateless
from gradtx.combinators._unitwise import unitwise_clip, unitwise_norm
from gradtx.combinators._variable_clipping import ClipVariablesState, clip_variables
from gradtx.combinators._weight_decay import (
    AddDecayedWeightsState,
    DecoupledWeightDecayState,
    add_decayed_weights,
    decoupled_weight_decay,
)
from gradtx.combinators._zeroing import ZeroNansState, keep_params_nonnegative, set_to_zero, zero_nans

__all__ = [
    "per_example_layer_norm_clip",
    "unitwise_clip",
    "unitwise_norm",
    "AccumulateGradientsState",
    "AccumulationType",
    "Accumulator",
    "AddDecayedWeightsState",
    "AddNoiseState",
    "ApplyEveryState",
    "ApplyIfFiniteState",
    "ClipByGlobalNormState",
    "ClipState",
    "ClipVariablesState",
    "ConditionallyMaskState",
    "ConditionallyTransformState",
    "DecoupledWeightDecayState",
    "DifferentiallyPrivateAggregateState",
    "InjectHyperparamsState",
    "LookaheadState",
    "LossScaleState",
    "MaskedState",
    "MeasureEmaState",
    "MicrobatchOutputs",
    "MonitorState",
    "MovingAverageState",
    "ReduceOnPlateauState",
    "ScaleGradientsState",
    "SnapshotState",
    "SplitRealAndImaginaryArrays",
    "SplitRealAndImaginaryState",
    "ZeroNansState",
    "accumulate_gradients",
    "adaptive_grad_clip",
    "add_decayed_weights",
    "add_noise",
    "apply_every",
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
    "low_bit_state",
    "loss_scaled",
    "masked",
    "measure_with_ema",
    "micro_grad",
    "micro_vmap",
    "microbatch",
    "monitor",
    "moving_average",
    "named_chain",
    "partition",
    "per_example_global_norm_clip",
    "reduce_on_plateau",
    "reshape_batch_axis",
    "scale_gradients",
    "scale_loss",
    "set_to_zero",
    "skip_large_updates",
    "skip_not_finite",
    "slow_params",
    "snapshot",
    "split_real_and_imaginary",
    "stateless",
    "swap_averaged",
    "transform_gradients",
    "zero_nans",
]


_MOVED = {
    "BacktrackingLinesearchInfo": "gradtx._algorithms.linesearch",
    "GaLoreDimensionNumbers": "gradtx._algorithms.galore",
    "GaLoreState": "gradtx._algorithms.galore",
    "HutchinsonState": "gradtx._algorithms.sophia",
    "MechanizeState": "gradtx._algorithms.mechanic",
    "MomoAdamState": "gradtx._algorithms.momo",
    "MomoState": "gradtx._algorithms.momo",
    "SAMState": "gradtx._algorithms.sam",
    "ScaleByBacktrackingLinesearchState": "gradtx._algorithms.linesearch",
    "ScaleByLBFGSState": "gradtx._algorithms.lbfgs",
    "ScaleByZoomLinesearchState": "gradtx._algorithms.linesearch_zoom",
    "SophiaState": "gradtx._algorithms.sophia",
    "ZoomLinesearchInfo": "gradtx._algorithms.linesearch_zoom",
    "hutchinson_estimator_diag_hessian": "gradtx._algorithms.sophia",
    "mechanize": "gradtx._algorithms.mechanic",
    "momo": "gradtx._algorithms.momo",
    "momo_adam": "gradtx._algorithms.momo",
    "normalize": "gradtx._algorithms.sam",
    "sam": "gradtx._algorithms.sam",
    "scale_by_backtracking_linesearch": "gradtx._algorithms.linesearch",
    "scale_by_galore": "gradtx._algorithms.galore",
    "scale_by_lbfgs": "gradtx._algorithms.lbfgs",
    "scale_by_sophia": "gradtx._algorithms.sophia",
    "scale_by_zoom_linesearch": "gradtx._algorithms.linesearch_zoom",
    "value_and_grad_from_state": "gradtx._algorithms.linesearch",
}
"""Update rules that were once filed here, now in their algorithm's module (and in `gradtx.transforms` /
`gradtx.optimizers`): `gradtx.combinators.<name>` still finds them."""


def __getattr__(name: str):
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'gradtx.combinators' has no attribute {name!r}")
