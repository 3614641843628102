"""Building blocks: the update rules (`scale_by_*`, `trace`, ...), one family per file."""

from gradtx.transforms._adadelta import ScaleByAdadeltaState, scale_by_adadelta
from gradtx.transforms._adagrad import (
    ScaleByAdagradDAState,
    ScaleByAdagradState,
    scale_by_adagrad,
    scale_by_adagrad_da,
)
from gradtx.transforms._adam import (
    ScaleByAdamState,
    scale_by_adam,
    scale_by_adam_gs,
    scale_by_lazy_adam,
    scale_by_lazy_adam_gs,
    scale_by_nesterov_adam,
)
from gradtx.transforms._adamax import (
    ScaleByAdamaxState,
    ScaleByAmsgradState,
    scale_by_adamax,
    scale_by_amsgrad,
)
from gradtx.transforms._ftrl import ScaleByFtrlState, scale_by_ftrl
from gradtx.transforms._ggt import ScaleByGGTState, scale_by_ggt
from gradtx.transforms._grad_variance import ScaleByGradVarianceState, scale_by_grad_variance
from gradtx.transforms._lars import ScaleByLarsState, scale_by_lars
from gradtx.transforms._momentum import TraceState, trace
from gradtx.transforms._normalize import ScaleByL2NormalizationState, scale_by_l2_normalization
from gradtx.transforms._per_leaf import PerLeafState, per_leaf
from gradtx.transforms._proximal import (
    ScaleByProximalAdagradState,
    ScaleByProximalSGDState,
    scale_by_proximal_adagrad,
    scale_by_proximal_sgd,
)
from gradtx.transforms._rmsprop import ScaleByRmspropState, scale_by_rmsprop
from gradtx.transforms._scale import ScaleByScheduleState, scale, scale_by_learning_rate, scale_by_schedule
from gradtx.transforms._shampoo import ScaleByShampooState, scale_by_shampoo
from gradtx.transforms._sign import (
    ScaleByAddSignState,
    ScaleByNeuralOptimizer1State,
    ScaleByPowerSignState,
    scale_by_addsign,
    scale_by_neural_optimizer1,
    scale_by_powersign,
)

__all__ = [
    "PerLeafState",
    "ScaleByAdadeltaState",
    "ScaleByAdagradDAState",
    "ScaleByAdagradState",
    "ScaleByAdamState",
    "ScaleByAdamaxState",
    "ScaleByAddSignState",
    "ScaleByAmsgradState",
    "ScaleByFtrlState",
    "ScaleByGGTState",
    "ScaleByGradVarianceState",
    "ScaleByL2NormalizationState",
    "ScaleByLarsState",
    "ScaleByNeuralOptimizer1State",
    "ScaleByPowerSignState",
    "ScaleByProximalAdagradState",
    "ScaleByProximalSGDState",
    "ScaleByRmspropState",
    "ScaleByScheduleState",
    "ScaleByShampooState",
    "TraceState",
    "per_leaf",
    "scale",
    "scale_by_adadelta",
    "scale_by_adagrad",
    "scale_by_adagrad_da",
    "scale_by_adam",
    "scale_by_adam_gs",
    "scale_by_adamax",
    "scale_by_addsign",
    "scale_by_amsgrad",
    "scale_by_ftrl",
    "scale_by_ggt",
    "scale_by_grad_variance",
    "scale_by_l2_normalization",
    "scale_by_lars",
    "scale_by_lazy_adam",
    "scale_by_lazy_adam_gs",
    "scale_by_learning_rate",
    "scale_by_nesterov_adam",
    "scale_by_neural_optimizer1",
    "scale_by_powersign",
    "scale_by_proximal_adagrad",
    "scale_by_proximal_sgd",
    "scale_by_rmsprop",
    "scale_by_schedule",
    "scale_by_shampoo",
    "trace",
]
