"""The table of optax's names -> gradtx factories: the building blocks, then the optimizers optax chains of
them.  A block is `block(optax name, gradtx factory, optax's state class, field renames, argument names)`;
an optimizer is the recipe optax writes (its docstring is the chain), taking optax's arguments as
attributes of `a`. Signatures, docstrings and state classes are made by `_mirror.py`; every name here is
tested against optax itself (20 steps, state layouts, signatures). The names whose state optax lays out
otherwise (noise, Fromage, optimism) are in `_table_relaid.py`."""

from __future__ import annotations

from typing import Any

import jax

import gradtx
from gradtx._algorithms.adam import scale_by_bias_corrected_adam
from gradtx._algorithms.linesearch_zoom import zoom_linesearch
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx.combinators._clip import clip_to_global_norm
from gradtx.optax_compat._mirror import MARKERS, block, forward, recipe, state_class
from gradtx.optax_compat._table_wrappers import masked

# --------------------------------------------------------------------------- optax's state classes
ScaleByAdamState = state_class("ScaleByAdamState", gradtx.ScaleByBiasCorrectedAdamState)
ScaleByBeliefState = state_class("ScaleByBeliefState", gradtx.ScaleByBeliefState)
ScaleByAmsgradState = state_class("ScaleByAmsgradState", gradtx.ScaleByBiasCorrectedAmsgradState)
ScaleByAdanState = state_class(
    "ScaleByAdanState", gradtx.ScaleByAdanState, {"count": "t"}, order=("m", "v", "n", "g", "t")
)
ScaleByLionState = state_class("ScaleByLionState", gradtx.ScaleByLionState)
ScaleByNovogradState = state_class("ScaleByNovogradState", gradtx.ScaleByNovogradState)
ScaleByRmsState = state_class("ScaleByRmsState", gradtx.ScaleByRmsState, count=False)
ScaleByRmsWithCountState = state_class("ScaleByRmsWithCountState", gradtx.ScaleByRmsState)
ScaleByRStdDevState = state_class("ScaleByRStdDevState", gradtx.ScaleByRStdDevState, count=False)
ScaleByRStdDevWithCountState = state_class("ScaleByRStdDevWithCountState", gradtx.ScaleByRStdDevState)
ScaleByRssState = state_class("ScaleByRssState", gradtx.ScaleByRssState, count=False)
_ADADELTA = {"accum": "e_g", "accum_update": "e_x"}
ScaleByAdaDeltaState = state_class(
    "ScaleByAdaDeltaState", gradtx.ScaleByAdadeltaState, _ADADELTA, count=False
)
ScaleByRpropState = state_class("ScaleByRpropState", gradtx.ScaleByRpropState, count=False)
ScaleBySM3State = state_class("ScaleBySM3State", gradtx.ScaleBySM3State, count=False)
FactoredState = state_class("FactoredState", gradtx.ScaleByFactoredRmsState)
TraceState = state_class("TraceState", gradtx.TraceState, {"momentum": "trace"}, count=False)

# --------------------------------------------------------------------------- building blocks
scale_by_adam = block("scale_by_adam", scale_by_bias_corrected_adam, ScaleByAdamState)
scale_by_radam = block("scale_by_radam", gradtx.scale_by_radam, ScaleByAdamState)
scale_by_belief = block("scale_by_belief", gradtx.scale_by_belief, ScaleByBeliefState)
scale_by_yogi = block("scale_by_yogi", gradtx.scale_by_yogi, ScaleByAdamState)
scale_by_adamax = block("scale_by_adamax", gradtx.scale_by_bias_corrected_adamax, ScaleByAdamState)
scale_by_amsgrad = block("scale_by_amsgrad", gradtx.scale_by_bias_corrected_amsgrad, ScaleByAmsgradState)
scale_by_adan = block("scale_by_adan", gradtx.scale_by_adan, ScaleByAdanState, {"count": "t"})
scale_by_lion = block("scale_by_lion", gradtx.scale_by_lion, ScaleByLionState)
scale_by_novograd = block("scale_by_novograd", gradtx.scale_by_novograd, ScaleByNovogradState)
scale_by_rms = block(
    "scale_by_rms",
    gradtx.scale_by_rms,
    lambda a: ScaleByRmsWithCountState if a.bias_correction else ScaleByRmsState,
)
scale_by_stddev = block(
    "scale_by_stddev",
    gradtx.scale_by_stddev,
    lambda a: ScaleByRStdDevWithCountState if a.bias_correction else ScaleByRStdDevState,
)
scale_by_rss = block("scale_by_rss", gradtx.scale_by_rss, ScaleByRssState)
scale_by_adadelta = block(
    "scale_by_adadelta", gradtx.scale_by_adadelta, ScaleByAdaDeltaState, _ADADELTA, note="TF's ApplyAdadelta"
)
scale_by_rprop = block(
    "scale_by_rprop", gradtx.scale_by_rprop, ScaleByRpropState,
    note="the state equals optax's step for step; the update is this step's, the one the state stores, where "
    "optax 0.2.8 returns the previous step's (a deliberate difference)",
)  # fmt: skip
scale_by_sm3 = block("scale_by_sm3", gradtx.scale_by_sm3, ScaleBySM3State)
MARKERS["<decay_rate_fn>"] = None  # gradtx's default decay is optax's power law
scale_by_factored_rms = block(
    "scale_by_factored_rms", gradtx.scale_by_factored_rms, FactoredState, args={"epsilon": "eps"}
)
trace = block(
    "trace", gradtx.trace, TraceState, {"momentum": "trace"},
    args={"decay": "momentum", "accumulator_dtype": "mu_dtype"}, example="trace(0.9)",
)  # fmt: skip
ema = block("ema", gradtx.ema, args={"accumulator_dtype": "mu_dtype"}, example="ema(0.9)")


@recipe("scale_by_learning_rate", gradtx.scale_by_learning_rate)
def scale_by_learning_rate(a):
    """`gradtx.scale_by_learning_rate(learning_rate, flip_sign)`, or `identity()` for None (optax's)."""
    if a.learning_rate is None:
        return gradtx.identity()
    return gradtx.scale_by_learning_rate(a.learning_rate, flip_sign=a.flip_sign)


@recipe("clip_by_global_norm", gradtx.clip_by_global_norm, example="clip_by_global_norm(1.0)")
def clip_by_global_norm(a):
    """gradtx's clip to a global norm of at most `max_norm` (`u * (c * min(1/n, 1/c))`, optax's `u / n * c`
    to rounding), in optax's `EmptyState()` (`gradtx.clip_by_global_norm` keeps a count and the norm, and
    takes schedules)."""
    if _checks.is_schedule(a.max_norm):
        raise TypeError(
            f"`clip_by_global_norm`: optax's takes a number or a scalar array as `max_norm`, got the "
            f"schedule {a.max_norm!r}; `gradtx.clip_by_global_norm` takes schedules (its state keeps a "
            "count)."
        )
    _checks.check_nonnegative("clip_by_global_norm", "max_norm", a.max_norm)  # optax's tests step with 0
    clip = gradtx.stateless(lambda updates, params: clip_to_global_norm(updates, a.max_norm)[0])
    return _protocol.ElementWise(*clip)


@recipe("add_decayed_weights", gradtx.add_decayed_weights)
def add_decayed_weights(a):
    """`gradtx.add_decayed_weights(weight_decay)`, with a `mask` optax's `masked(..., mask)`, state and
    all."""
    decay = gradtx.add_decayed_weights(a.weight_decay)
    return decay if a.mask is None else masked(decay, a.mask)


@recipe("apply_if_finite", gradtx.apply_if_finite, example="apply_if_finite(optax.sgd(0.1), 2)")
def apply_if_finite(a):
    """`gradtx.apply_if_finite(inner, max_consecutive_errors, check_updates=False)`: the gradients alone
    decide, as in optax."""
    return gradtx.apply_if_finite(a.inner, a.max_consecutive_errors, check_updates=False)


@recipe(
    "global_norm", kind="function", returns="A scalar array.", example="global_norm(jnp.ones(4))", api=False
)
def global_norm(a):
    """the L2 norm of all the arrays of `updates` together (`gradtx.global_norm`).

    Args:
      updates: a tree of arrays.
    """
    return gradtx.global_norm(a.updates)


def _lr(learning_rate: Any) -> Any:
    return gradtx.scale_by_learning_rate(learning_rate)


# --------------------------------------------------------------------------- optimizers
@recipe("adam", scale_by_adam)
def adam(a):
    """`chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov), scale_by_learning_rate)`."""
    return gradtx.chain(forward(scale_by_adam, a), _lr(a.learning_rate))


@recipe("nadam", scale_by_adam)
def nadam(a):
    """`adam` with `nesterov=True`."""
    return forward(adam, a)


@recipe("adamw", scale_by_adam, add_decayed_weights)
def adamw(a):
    """`chain(scale_by_adam(...), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)`."""
    return gradtx.chain(forward(scale_by_adam, a), forward(add_decayed_weights, a), _lr(a.learning_rate))


@recipe("nadamw", scale_by_adam, add_decayed_weights)
def nadamw(a):
    """`adamw` with `nesterov=True`."""
    return forward(adamw, a)


@recipe("radam", scale_by_radam)
def radam(a):
    """`chain(scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
    scale_by_learning_rate)`."""
    return gradtx.chain(forward(scale_by_radam, a), _lr(a.learning_rate))


@recipe("adabelief", scale_by_belief)
def adabelief(a):
    """`chain(scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov), scale_by_learning_rate)`."""
    return gradtx.chain(forward(scale_by_belief, a), _lr(a.learning_rate))


@recipe("yogi", scale_by_yogi)
def yogi(a):
    """`chain(scale_by_yogi(b1, b2, eps), scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(forward(scale_by_yogi, a), _lr(a.learning_rate))


@recipe("lamb", scale_by_adam, add_decayed_weights, gradtx.scale_by_trust_ratio)
def lamb(a):
    """`chain(scale_by_adam(...), add_decayed_weights(...), scale_by_trust_ratio(),
    scale_by_learning_rate)`."""
    decay = forward(add_decayed_weights, a)
    return gradtx.chain(forward(scale_by_adam, a), decay, gradtx.scale_by_trust_ratio(), _lr(a.learning_rate))


@recipe("adan", scale_by_adan, add_decayed_weights)
def adan(a):
    """`chain(scale_by_adan(...), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)`."""
    return gradtx.chain(forward(scale_by_adan, a), forward(add_decayed_weights, a), _lr(a.learning_rate))


@recipe("amsgrad", scale_by_amsgrad)
def amsgrad(a):
    """`chain(scale_by_amsgrad(...), scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(forward(scale_by_amsgrad, a), _lr(a.learning_rate))


@recipe("adamax", scale_by_adamax)
def adamax(a):
    """`chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(forward(scale_by_adamax, a), _lr(a.learning_rate))


@recipe("adamaxw", scale_by_adamax, add_decayed_weights)
def adamaxw(a):
    """`chain(scale_by_adamax(b1, b2, eps), add_decayed_weights(weight_decay, mask),
    scale_by_learning_rate)`."""
    return gradtx.chain(forward(scale_by_adamax, a), forward(add_decayed_weights, a), _lr(a.learning_rate))


@recipe("lion", scale_by_lion, add_decayed_weights)
def lion(a):
    """`chain(scale_by_lion(b1, b2, mu_dtype), add_decayed_weights(weight_decay, mask),
    scale_by_learning_rate)`."""
    return gradtx.chain(forward(scale_by_lion, a), forward(add_decayed_weights, a), _lr(a.learning_rate))


@recipe("novograd", scale_by_novograd)
def novograd(a):
    """`chain(scale_by_novograd(b1, b2, eps, eps_root, weight_decay),
    scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(forward(scale_by_novograd, a), _lr(a.learning_rate))


@recipe("sgd", trace)
def sgd(a):
    """`chain(trace(momentum, nesterov, accumulator_dtype) or identity(), scale_by_learning_rate)`."""
    first = gradtx.identity() if a.momentum is None else trace(a.momentum, a.nesterov, a.accumulator_dtype)
    return gradtx.chain(first, _lr(a.learning_rate))


@recipe("sm3", scale_by_sm3)
def sm3(a):
    """`chain(scale_by_sm3(momentum), scale(-learning_rate))`."""
    return gradtx.chain(scale_by_sm3(a.momentum), gradtx.scale(-a.learning_rate))


@recipe("sign_sgd")
def sign_sgd(a):
    """`chain(scale_by_sign(), scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(gradtx.scale_by_sign(), _lr(a.learning_rate))


@recipe("signum", ema)
def signum(a):
    """`chain(ema(beta, debias=False, accumulator_dtype), scale_by_sign(), scale_by_learning_rate)`."""
    averaged = ema(a.beta, debias=False, accumulator_dtype=a.accumulator_dtype)
    return gradtx.chain(averaged, gradtx.scale_by_sign(), _lr(a.learning_rate))


@recipe("adagrad", scale_by_rss)
def adagrad(a):
    """`chain(scale_by_rss(initial_accumulator_value, eps), scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(forward(scale_by_rss, a), _lr(a.learning_rate))


@recipe("rprop", scale_by_rprop)
def rprop(a):
    """`chain(scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size, max_step_size),
    scale(-1))`."""
    return gradtx.chain(forward(scale_by_rprop, a), gradtx.scale(-1.0))


@recipe("adadelta", add_decayed_weights, scale_by_adadelta)
def adadelta(a):
    """`chain(add_decayed_weights(weight_decay, weight_decay_mask), scale_by_adadelta(rho, eps), lr)`."""
    decay = add_decayed_weights(a.weight_decay, a.weight_decay_mask)
    return gradtx.chain(decay, scale_by_adadelta(a.rho, a.eps), scale_by_learning_rate(a.learning_rate))


@recipe("rmsprop", scale_by_rms, trace)
def rmsprop(a):
    """`chain(scale_by_rms(...) or scale_by_stddev(...) if centered, scale_by_learning_rate, trace(momentum,
    nesterov) or identity())`."""
    scaling = forward(scale_by_stddev if a.centered else scale_by_rms, a)
    momentum = gradtx.identity() if a.momentum is None else trace(a.momentum, a.nesterov)
    return gradtx.chain(scaling, _lr(a.learning_rate), momentum)


MARKERS["<dtype_momentum>"] = jax.numpy.float32


@recipe("adafactor", scale_by_factored_rms, gradtx.clip_by_block_rms, ema, add_decayed_weights)
def adafactor(a):
    """`chain(scale_by_factored_rms(...), clip_by_block_rms, scale_by_learning_rate(flip_sign=False),
    scale_by_param_block_rms, ema (momentum), add_decayed_weights, scale(-1))`."""
    tx = [scale_by_factored_rms(a.factored, a.decay_rate, a.decay_offset, a.min_dim_size_to_factor, a.eps)]
    if a.clipping_threshold is not None:
        tx.append(gradtx.clip_by_block_rms(a.clipping_threshold))
    if a.learning_rate is not None:
        tx.append(gradtx.scale_by_learning_rate(a.learning_rate, flip_sign=False))
    if a.multiply_by_parameter_scale:
        tx.append(gradtx.scale_by_param_block_rms())
    if a.momentum is not None:
        tx.append(ema(a.momentum, debias=False, accumulator_dtype=a.dtype_momentum))
    if a.weight_decay_rate is not None:
        tx.append(add_decayed_weights(a.weight_decay_rate, a.weight_decay_mask))
    return gradtx.chain(*tx, gradtx.scale(-1))


@recipe("lars", add_decayed_weights, gradtx.scale_by_trust_ratio, trace, example="lars(0.1)")
def lars(a):
    """`chain(masked(add_decayed_weights), masked(scale_by_trust_ratio), learning rate, trace(momentum))`."""
    trust = gradtx.scale_by_trust_ratio(trust_coefficient=a.trust_coefficient, eps=a.eps)
    return gradtx.chain(
        add_decayed_weights(a.weight_decay, a.weight_decay_mask),
        masked(trust, a.trust_ratio_mask),
        _lr(a.learning_rate),
        trace(a.momentum, a.nesterov),
    )


# --------------------------------------------------------------------------- learning-rate free, L-BFGS
@recipe("polyak_sgd", gradtx.scale_by_polyak)
def polyak_sgd(a):
    """`chain(sgd(learning_rate=scaling), scale_by_polyak(f_min, max_learning_rate, eps, variant))`; `update`
    needs the extra argument `value`."""
    _checks.check_nonnegative("polyak_sgd", "scaling", a.scaling)  # before `sgd` names it `learning_rate`
    polyak = gradtx.scale_by_polyak(a.f_min, a.max_learning_rate, a.eps, a.variant)
    return gradtx.chain(sgd(learning_rate=a.scaling), polyak)


MARKERS["<param_dtype>"] = jax.numpy.float32
scale_by_distance_over_gradients = block(
    "scale_by_distance_over_gradients", gradtx.scale_by_distance_over_gradients
)
scale_by_lbfgs = block("scale_by_lbfgs", gradtx.scale_by_lbfgs)
scale_by_backtracking_linesearch = block(
    "scale_by_backtracking_linesearch", gradtx.scale_by_backtracking_linesearch,
    example="scale_by_backtracking_linesearch(15)",
)  # fmt: skip


@recipe("scale_by_zoom_linesearch", gradtx.scale_by_zoom_linesearch, example="scale_by_zoom_linesearch(15)")
def scale_by_zoom_linesearch(a):
    """`gradtx.scale_by_zoom_linesearch`'s search, whose first slope is optax's for complex params (gradtx's
    corrects it)."""
    return zoom_linesearch(
        a.max_linesearch_steps, a.max_learning_rate, a.tol, a.increase_factor, a.slope_rtol, a.curv_rtol,
        a.approx_dec_rtol, a.stepsize_precision, a.initial_guess_strategy, a.verbose, optax_start_slope=True,
    )  # fmt: skip


MARKERS["<linesearch>"] = scale_by_zoom_linesearch(
    max_linesearch_steps=20, initial_guess_strategy="one"
)  # optax's default line search of `lbfgs`, made once as optax's default argument is


@recipe("lbfgs", gradtx.lbfgs, scale_by_lbfgs)
def lbfgs(a):
    """`chain(scale_by_lbfgs, scale(-1) or scale_by_learning_rate, linesearch or identity)`; `update` takes
    `value`, `grad` and `value_fn` (and computes the first two from `value_fn` when they are not given)."""
    return gradtx.lbfgs(
        a.learning_rate, a.memory_size, scale_init_precond=a.scale_init_precond, linesearch=a.linesearch
    )
