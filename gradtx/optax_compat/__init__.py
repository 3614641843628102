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

from typing import Any

from gradtx import (
    EmaState,
    EmptyState,
    GradientTransformation,
    OptState,
    Params,
    ScalarOrSchedule,
    ScaleByScheduleState,
    Schedule,
    Updates,
    apply_updates,
    chain,
    clip,
    clip_by_block_rms,
    identity,
    named_chain,
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
from gradtx.optax_compat import schedules
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
from gradtx.optax_compat._masked import MaskedNode, MaskedState, masked
from gradtx.optax_compat._multi_steps import MultiSteps, MultiStepsState
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

GradientTransformationExtraArgs = GradientTransformation
"""optax's name for a transform whose `update` takes extra keyword arguments: every gradtx transform."""

__all__ = [
    "EmaState",
    "EmptyState",
    "FactoredState",
    "GradientTransformation",
    "GradientTransformationExtraArgs",
    "InjectHyperparamsState",
    "InjectStatefulHyperparamsState",
    "MaskedNode",
    "MaskedState",
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
    "ScaleByLionState",
    "ScaleByNovogradState",
    "ScaleByRStdDevState",
    "ScaleByRmsState",
    "ScaleByRpropState",
    "ScaleByRssState",
    "ScaleBySM3State",
    "ScaleByScheduleState",
    "Schedule",
    "TraceState",
    "Updates",
    "WrappedSchedule",
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
    "inject_hyperparams",
    "inject_stateful_hyperparams",
    "join_schedules",
    "lamb",
    "lars",
    "linear_onecycle_schedule",
    "linear_schedule",
    "lion",
    "masked",
    "nadam",
    "nadamw",
    "named_chain",
    "novograd",
    "piecewise_constant_schedule",
    "piecewise_interpolate_schedule",
    "polynomial_schedule",
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
    "scale_by_factored_rms",
    "scale_by_learning_rate",
    "scale_by_lion",
    "scale_by_novograd",
    "scale_by_param_block_rms",
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
    "schedules",
    "set_to_zero",
    "sgd",
    "sgdr_schedule",
    "sign_sgd",
    "signum",
    "skip_large_updates",
    "skip_not_finite",
    "sm3",
    "stateless",
    "trace",
    "tree",
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
