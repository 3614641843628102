"""Building blocks: the update rules (`scale_by_*`, `trace`, ...), one family per file."""

from gradtx.transforms._adadelta import ScaleByAdadeltaState, scale_by_adadelta
from gradtx.transforms._adafactor import (
    BlockRmsState,
    ScaleByFactoredRmsState,
    clip_by_block_rms,
    scale_by_factored_rms,
    scale_by_param_block_rms,
)
from gradtx.transforms._adagrad import (
    ScaleByAdagradDAState,
    ScaleByAdagradState,
    scale_by_adagrad,
    scale_by_adagrad_da,
)
from gradtx.transforms._adam import (
    ScaleByAdamState,
    scale_by_adam,
    scale_by_lazy_adam,
    scale_by_nesterov_adam,
)
from gradtx.transforms._adam_gs import scale_by_adam_gs, scale_by_lazy_adam_gs
from gradtx.transforms._adamax import (
    ScaleByAdamaxState,
    ScaleByAmsgradState,
    scale_by_adamax,
    scale_by_amsgrad,
)
from gradtx.transforms._adan import ScaleByAdanState, scale_by_adan
from gradtx.transforms._adaptive import (
    ScaleByBeliefState,
    ScaleByRadamState,
    ScaleByYogiState,
    scale_by_belief,
    scale_by_radam,
    scale_by_yogi,
)
from gradtx.transforms._ademamix import (
    ScaleByAdemamixState,
    ScaleBySimplifiedAdemamixState,
    scale_by_ademamix,
    scale_by_simplified_ademamix,
)
from gradtx.transforms._bias_corrected_adam import (
    ScaleByBiasCorrectedAdamState,
    ScaleByBiasCorrectedRmsState,
    scale_by_bias_corrected_adam,
    scale_by_bias_corrected_rms,
)
from gradtx.transforms._bias_corrected_max import (
    ScaleByBiasCorrectedAdamaxState,
    ScaleByBiasCorrectedAmsgradState,
    scale_by_bias_corrected_adamax,
    scale_by_bias_corrected_amsgrad,
)
from gradtx.transforms._block_norm import scale_by_param_block_norm
from gradtx.transforms._centralize import centralize
from gradtx.transforms._cocob import ScaleByCocobState, scale_by_cocob
from gradtx.transforms._delayed_moment import (
    ScaleByAcpropState,
    ScaleByAdoptState,
    scale_by_acprop,
    scale_by_adopt,
)
from gradtx.transforms._dog import (
    ScaleByDistanceOverGradientsState,
    ScaleByDoGState,
    ScaleByDoWGState,
    scale_by_distance_over_gradients,
    scale_by_dog,
    scale_by_dowg,
)
from gradtx.transforms._ema import EmaState, ema
from gradtx.transforms._ftrl import ScaleByFtrlState, scale_by_ftrl
from gradtx.transforms._ggt import ScaleByGGTState, scale_by_ggt
from gradtx.transforms._grad_variance import ScaleByGradVarianceState, scale_by_grad_variance
from gradtx.transforms._lars import ScaleByLarsState, scale_by_lars
from gradtx.transforms._madgrad import ScaleByMadgradState, scale_by_madgrad
from gradtx.transforms._momentum import TraceState, trace
from gradtx.transforms._muon import MuonDimensionNumbers, ScaleByMuonState, scale_by_muon, scale_by_shape
from gradtx.transforms._normalize import ScaleByL2NormalizationState, scale_by_l2_normalization
from gradtx.transforms._normalize_update import NormalizeByUpdateNormState, normalize_by_update_norm
from gradtx.transforms._novograd import ScaleByNovogradState, scale_by_novograd
from gradtx.transforms._optimistic import ScaleByOptimisticGradientState, scale_by_optimistic_gradient
from gradtx.transforms._per_leaf import PerLeafState, per_leaf
from gradtx.transforms._polyak import ScaleByPolyakState, scale_by_polyak
from gradtx.transforms._prodigy import (
    ScaleByDAdaptAdamWState,
    ScaleByProdigyState,
    scale_by_dadapt_adamw,
    scale_by_prodigy,
)
from gradtx.transforms._proximal import (
    ScaleByProximalAdagradState,
    ScaleByProximalSGDState,
    scale_by_proximal_adagrad,
    scale_by_proximal_sgd,
)
from gradtx.transforms._rmsprop import ScaleByRmspropState, scale_by_rmsprop
from gradtx.transforms._root_mean_square import (
    ScaleByRmsState,
    ScaleByRssState,
    ScaleByRStdDevState,
    scale_by_rms,
    scale_by_rss,
    scale_by_stddev,
)
from gradtx.transforms._rprop import ScaleByRpropState, scale_by_rprop
from gradtx.transforms._scale import ScaleByScheduleState, scale, scale_by_learning_rate, scale_by_schedule
from gradtx.transforms._schedule_free import (
    ScaleByScheduleFreeState,
    scale_by_schedule_free,
    schedule_free_eval_params,
)
from gradtx.transforms._shampoo import ScaleByShampooState, scale_by_shampoo
from gradtx.transforms._sign import (
    ScaleByAddSignState,
    ScaleByNeuralOptimizer1State,
    ScaleByPowerSignState,
    scale_by_addsign,
    scale_by_neural_optimizer1,
    scale_by_powersign,
)
from gradtx.transforms._sign_momentum import ScaleByLionState, scale_by_lion, scale_by_sign
from gradtx.transforms._sm3 import ScaleBySM3State, scale_by_sm3
from gradtx.transforms._trust_ratio import ScaleByTrustRatioState, scale_by_trust_ratio

__all__ = [
    "BlockRmsState",
    "EmaState",
    "MuonDimensionNumbers",
    "NormalizeByUpdateNormState",
    "PerLeafState",
    "ScaleByAcpropState",
    "ScaleByAdadeltaState",
    "ScaleByAdagradDAState",
    "ScaleByAdagradState",
    "ScaleByAdamState",
    "ScaleByAdamaxState",
    "ScaleByAdanState",
    "ScaleByAddSignState",
    "ScaleByAdemamixState",
    "ScaleByAdoptState",
    "ScaleByAmsgradState",
    "ScaleByBeliefState",
    "ScaleByBiasCorrectedAdamState",
    "ScaleByBiasCorrectedAdamaxState",
    "ScaleByBiasCorrectedAmsgradState",
    "ScaleByBiasCorrectedRmsState",
    "ScaleByCocobState",
    "ScaleByDAdaptAdamWState",
    "ScaleByDistanceOverGradientsState",
    "ScaleByDoGState",
    "ScaleByDoWGState",
    "ScaleByFactoredRmsState",
    "ScaleByFtrlState",
    "ScaleByGGTState",
    "ScaleByGradVarianceState",
    "ScaleByL2NormalizationState",
    "ScaleByLarsState",
    "ScaleByLionState",
    "ScaleByMadgradState",
    "ScaleByMuonState",
    "ScaleByNeuralOptimizer1State",
    "ScaleByNovogradState",
    "ScaleByOptimisticGradientState",
    "ScaleByPolyakState",
    "ScaleByPowerSignState",
    "ScaleByProdigyState",
    "ScaleByProximalAdagradState",
    "ScaleByProximalSGDState",
    "ScaleByRStdDevState",
    "ScaleByRadamState",
    "ScaleByRmsState",
    "ScaleByRmspropState",
    "ScaleByRpropState",
    "ScaleByRssState",
    "ScaleBySM3State",
    "ScaleByScheduleFreeState",
    "ScaleByScheduleState",
    "ScaleByShampooState",
    "ScaleBySimplifiedAdemamixState",
    "ScaleByTrustRatioState",
    "ScaleByYogiState",
    "TraceState",
    "centralize",
    "clip_by_block_rms",
    "ema",
    "normalize_by_update_norm",
    "per_leaf",
    "scale",
    "scale_by_acprop",
    "scale_by_adadelta",
    "scale_by_adagrad",
    "scale_by_adagrad_da",
    "scale_by_adam",
    "scale_by_adam_gs",
    "scale_by_adamax",
    "scale_by_adan",
    "scale_by_addsign",
    "scale_by_ademamix",
    "scale_by_adopt",
    "scale_by_amsgrad",
    "scale_by_belief",
    "scale_by_bias_corrected_adam",
    "scale_by_bias_corrected_adamax",
    "scale_by_bias_corrected_amsgrad",
    "scale_by_bias_corrected_rms",
    "scale_by_cocob",
    "scale_by_dadapt_adamw",
    "scale_by_distance_over_gradients",
    "scale_by_dog",
    "scale_by_dowg",
    "scale_by_factored_rms",
    "scale_by_ftrl",
    "scale_by_ggt",
    "scale_by_grad_variance",
    "scale_by_l2_normalization",
    "scale_by_lars",
    "scale_by_lazy_adam",
    "scale_by_lazy_adam_gs",
    "scale_by_learning_rate",
    "scale_by_lion",
    "scale_by_madgrad",
    "scale_by_muon",
    "scale_by_nesterov_adam",
    "scale_by_neural_optimizer1",
    "scale_by_novograd",
    "scale_by_optimistic_gradient",
    "scale_by_param_block_norm",
    "scale_by_param_block_rms",
    "scale_by_polyak",
    "scale_by_powersign",
    "scale_by_prodigy",
    "scale_by_proximal_adagrad",
    "scale_by_proximal_sgd",
    "scale_by_radam",
    "scale_by_rms",
    "scale_by_rmsprop",
    "scale_by_rprop",
    "scale_by_rss",
    "scale_by_schedule",
    "scale_by_schedule_free",
    "scale_by_shampoo",
    "scale_by_shape",
    "scale_by_sign",
    "scale_by_simplified_ademamix",
    "scale_by_sm3",
    "scale_by_stddev",
    "scale_by_trust_ratio",
    "scale_by_yogi",
    "schedule_free_eval_params",
    "trace",
]
