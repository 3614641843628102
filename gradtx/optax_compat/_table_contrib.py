"""The table, `optax.contrib`'s names: AdEMAMix, ADOPT, ACProp, MADGRAD, the learning-rate-free rules, the
plateau scale, SAM, Sophia, MoMo and differential privacy. Muon and GaLore are in `_table_contrib_matrix.py`,
schedule-free learning in `_table_contrib_schedule_free.py`.

As `_table.py`: each name is a gradtx factory in optax's signature and state classes, or the recipe
optax writes of them; `gradtx.optax_compat.contrib` gathers them under optax's address.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax

import gradtx
from gradtx import parallel
from gradtx._algorithms.adopt import adopt_clip_value
from gradtx._algorithms.mechanic import mechanic_transform
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.restated import restated
from gradtx.combinators._plateau import plateau_rule
from gradtx.optax_compat._mirror import MARKERS, block, forward, recipe, relaid, state_class
from gradtx.optax_compat._table import (
    ScaleByAdamState,
    ScaleByBeliefState,
    add_decayed_weights,
    scale_by_learning_rate,
    trace,
)

# --------------------------------------------------------------------------- optax's state classes
ScaleBySimplifiedAdEMAMixState = state_class(
    "ScaleBySimplifiedAdEMAMixState",
    gradtx.ScaleBySimplifiedAdemamixState,
    {"count": "t"},
)
MadgradState = state_class("MadgradState", gradtx.ScaleByMadgradState)
COCOBState = state_class("COCOBState", gradtx.ScaleByCocobState, count=False)
DoGState = state_class("DoGState", gradtx.ScaleByDoGState)
DoWGState = state_class("DoWGState", gradtx.ScaleByDoWGState)
_COUNT_LAST = ("exp_avg", "exp_avg_sq", "grad_sum")
ProdigyState = state_class(
    "ProdigyState", gradtx.ScaleByProdigyState,
    order=(*_COUNT_LAST, "params0", "estim_lr", "numerator_weighted", "count"),
)  # fmt: skip
DAdaptAdamWState = state_class(
    "DAdaptAdamWState",
    gradtx.ScaleByDAdaptAdamWState,
    order=(*_COUNT_LAST, "estim_lr", "numerator_weighted", "count"),
)
MechanicState = state_class(
    "MechanicState", gradtx.MechanizeState, order=("base_optimizer_state", "count", "r", "m", "v", "s", "x0")
)


class ScaleByAdemamixState(NamedTuple):
    """optax's `ScaleByAdemamixState`: gradtx's, with a second count (optax's for `b3` and `alpha`)."""

    count: _protocol.Count  # int32: completed updates
    count_m2: _protocol.Count  # int32: completed updates, again
    m1: _protocol.Updates  # the fast moving average of the gradients
    m2: _protocol.Updates  # the slow moving average of the gradients
    nu: _protocol.Updates  # second moment


class ReduceLROnPlateauState(NamedTuple):
    """optax's `ReduceLROnPlateauState` (its `count`: the losses averaged since the last check)."""

    scale: jax.Array  # the factor the updates are multiplied by (starts at 1)
    best_value: jax.Array  # the best mean loss so far (starts at inf)
    plateau_count: jax.Array  # int32: checks without improvement since the last improvement or drop
    cooldown_count: jax.Array  # int32: checks left in the cooldown after a drop
    count: _protocol.Count  # int32: losses averaged since the last check (not the number of updates)
    avg_value: jax.Array  # their mean


NormalizeState = _protocol.EmptyState
"""optax.contrib's name for the state of `normalize`: `EmptyState`."""

# --------------------------------------------------------------------------- Adam's relatives


@recipe("contrib.scale_by_ademamix", gradtx.scale_by_ademamix)
def scale_by_ademamix(a):
    """`gradtx.scale_by_ademamix` in optax's `ScaleByAdemamixState(count, count_m2, m1, m2, nu)`."""
    inner = gradtx.scale_by_ademamix(a.b1, a.b2, a.b3, a.alpha, a.eps, a.eps_root, mu_dtype=a.mu_dtype)
    return relaid(
        inner,
        lambda s: ScaleByAdemamixState(s.count, s.count, s.m1, s.m2, s.nu),
        lambda s: gradtx.ScaleByAdemamixState(s.count, s.m1, s.m2, s.nu),
    )


@recipe("contrib.ademamix", scale_by_ademamix, add_decayed_weights)
def ademamix(a):
    """`chain(scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype), add_decayed_weights(weight_decay,
    mask), scale_by_learning_rate(learning_rate))`."""
    decay = forward(add_decayed_weights, a)
    return gradtx.chain(forward(scale_by_ademamix, a), decay, scale_by_learning_rate(a.learning_rate))


scale_by_simplified_ademamix = block(
    "contrib.scale_by_simplified_ademamix", gradtx.scale_by_simplified_ademamix,
    ScaleBySimplifiedAdEMAMixState, {"count": "t"},
)  # fmt: skip


@recipe("contrib.simplified_ademamix", scale_by_simplified_ademamix, add_decayed_weights)
def simplified_ademamix(a):
    """`chain(scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root), add_decayed_weights(weight_decay,
    mask), scale_by_learning_rate(learning_rate))`."""
    b, decay = forward(scale_by_simplified_ademamix, a), forward(add_decayed_weights, a)
    return gradtx.chain(b, decay, scale_by_learning_rate(a.learning_rate))


MARKERS["<clip_value_fn>"] = adopt_clip_value
scale_by_adopt = block("contrib.scale_by_adopt", gradtx.scale_by_adopt, ScaleByAdamState)


@recipe("contrib.adopt", scale_by_adopt)
def adopt(a):
    """`chain(scale_by_adopt(b1, b2, eps, mu_dtype, nesterov=..., use_clipping=..., clip_value_fn=...),
    scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(forward(scale_by_adopt, a), scale_by_learning_rate(a.learning_rate))


scale_by_acprop = block("contrib.scale_by_acprop", gradtx.scale_by_acprop, ScaleByBeliefState)


@recipe("contrib.acprop", scale_by_acprop, add_decayed_weights)
def acprop(a):
    """`chain(scale_by_acprop(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask),
    scale_by_learning_rate(learning_rate))`."""
    decay = forward(add_decayed_weights, a)
    return gradtx.chain(forward(scale_by_acprop, a), decay, scale_by_learning_rate(a.learning_rate))


scale_by_madgrad = block("contrib.scale_by_madgrad", gradtx.scale_by_madgrad, MadgradState)


@recipe("contrib.madgrad", scale_by_madgrad, add_decayed_weights)
def madgrad(a):
    """`chain(add_decayed_weights(weight_decay), scale_by_madgrad(learning_rate, momentum, eps))`."""
    return gradtx.chain(add_decayed_weights(a.weight_decay), forward(scale_by_madgrad, a))


# --------------------------------------------------------------------------- learning-rate free
@recipe("contrib.prodigy", gradtx.prodigy)
def prodigy(a):
    """`gradtx.prodigy` (`betas` split into `b1`, `b2`) in optax's `ProdigyState` (the count last)."""
    b1, b2 = a.betas
    inner = gradtx.prodigy(
        a.learning_rate, b1, b2, a.beta3, a.eps, a.estim_lr0, a.estim_lr_coef, a.weight_decay,
        safeguard_warmup=a.safeguard_warmup,
    )  # fmt: skip
    return restated(inner, ProdigyState)


@recipe("contrib.dadapt_adamw", gradtx.dadapt_adamw)
def dadapt_adamw(a):
    """`gradtx.dadapt_adamw` (`betas` split into `b1`, `b2`) in optax's `DAdaptAdamWState` (the count
    last)."""
    b1, b2 = a.betas
    inner = gradtx.dadapt_adamw(a.learning_rate, b1, b2, a.eps, a.estim_lr0, a.weight_decay)
    return restated(inner, DAdaptAdamWState)


@recipe("contrib.mechanize", gradtx.mechanize, example="mechanize(optax.sgd(0.1))")
def mechanize(a):
    """`gradtx.mechanize(base_optimizer, ...)` in optax's `MechanicState` (the base's state first)."""
    gradtx.mechanize(a.base_optimizer, a.weight_decay, a.eps, a.s_init, a.num_betas)  # the checks
    args = (a.base_optimizer, a.weight_decay, a.eps, a.s_init, a.num_betas)
    return mechanic_transform("mechanize", *args, MechanicState)


scale_by_cocob = block("contrib.scale_by_cocob", gradtx.scale_by_cocob, COCOBState)


@recipe("contrib.cocob", scale_by_cocob, add_decayed_weights)
def cocob(a):
    """`chain(add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate, flip_sign=False),
    scale_by_cocob(alpha, eps))`."""
    rate = scale_by_learning_rate(a.learning_rate, flip_sign=False)
    return gradtx.chain(add_decayed_weights(a.weight_decay, a.mask), rate, scale_by_cocob(a.alpha, a.eps))


scale_by_dog = block(
    "contrib._dog.scale_by_dog", gradtx.scale_by_dog, DoGState, example="scale_by_dog(('heuristic', 1e-6))"
)
scale_by_dowg = block("contrib._dog.scale_by_dowg", gradtx.scale_by_dowg, DoWGState)


def _decay(weight_decay: Any, mask: Any) -> Any:
    return gradtx.identity() if weight_decay is None else add_decayed_weights(weight_decay, mask)


@recipe("contrib.dog", scale_by_dog)
def dog(a):
    """`chain(add_decayed_weights(weight_decay, mask) or identity(), scale_by_dog(init_step, eps),
    scale_by_learning_rate(learning_rate))`."""
    dog_ = scale_by_dog(a.init_step, a.eps)
    return gradtx.chain(_decay(a.weight_decay, a.mask), dog_, scale_by_learning_rate(a.learning_rate))


@recipe("contrib.dowg", scale_by_dowg)
def dowg(a):
    """`chain(add_decayed_weights(weight_decay, mask) or identity(), scale_by_dowg(init_estim_sq_dist, eps),
    scale_by_learning_rate(learning_rate))`."""
    dowg_ = scale_by_dowg(a.init_estim_sq_dist, a.eps)
    return gradtx.chain(_decay(a.weight_decay, a.mask), dowg_, scale_by_learning_rate(a.learning_rate))


@recipe("contrib.reduce_on_plateau", gradtx.reduce_on_plateau)
def reduce_on_plateau(a):
    """`gradtx.reduce_on_plateau` in optax's `ReduceLROnPlateauState` (the losses averaged since the last
    check in `count`); `update` needs the extra argument `value`."""
    args = (a.factor, a.patience, a.rtol, a.atol, a.cooldown, a.accumulation_size, a.min_scale)
    return plateau_rule("reduce_on_plateau", ReduceLROnPlateauState, "count", *args)


# --------------------------------------------------------------------------- SAM, Sophia, MoMo
@recipe("contrib.sam", gradtx.sam, example="sam(optax.sgd(0.1), optax.sgd(0.05))")
def sam(a):
    """`gradtx.sam(optimizer, adv_optimizer, ...)`, whose opaque mode's `grad_fn` is averaged over
    `batch_axis_name` (`gradtx.parallel.mean_over`)."""
    tx = gradtx.sam(a.optimizer, a.adv_optimizer, a.sync_period, a.reset_state, a.opaque_mode)
    if a.batch_axis_name is None or not a.opaque_mode:
        return tx

    def update(updates, state, params=None, *, grad_fn=None, **extra_args):
        if grad_fn is not None:  # the averaging is routing: gradtx.parallel does the collective
            fn = grad_fn

            def grad_fn(p, i):
                return parallel.mean_over(fn(p, i), a.batch_axis_name)

        return tx.update(updates, state, params, grad_fn=grad_fn, **extra_args)

    return _factory.composite(tx.init, update, tx)


hutchinson_estimator_diag_hessian = block(
    "contrib.hutchinson_estimator_diag_hessian", gradtx.hutchinson_estimator_diag_hessian
)
MARKERS["<hessian_diagonal_fn>"] = hutchinson_estimator_diag_hessian()  # made once, as optax's default is


@recipe("contrib.sophia", gradtx.scale_by_sophia, add_decayed_weights)
def sophia(a):
    """`chain(scale_by_sophia(...), add_decayed_weights(weight_decay, weight_decay_mask),
    scale_by_learning_rate(learning_rate))`, optax's chain member for member."""
    b = gradtx.scale_by_sophia(
        a.b1, a.b2, a.eps, a.gamma, a.clip_threshold, a.update_interval, a.hessian_diagonal_fn,
        mu_dtype=a.mu_dtype, verbose=a.verbose, print_win_rate_every_n_steps=a.print_win_rate_every_n_steps,
    )  # fmt: skip
    return gradtx.chain(
        b, add_decayed_weights(a.weight_decay, a.weight_decay_mask), scale_by_learning_rate(a.learning_rate)
    )


momo = block("contrib.momo", gradtx.momo)
momo_adam = block("contrib.momo_adam", gradtx.momo_adam)

# --------------------------------------------------------------------------- privacy, GaLore


@recipe("contrib.differentially_private_aggregate", gradtx.differentially_private_aggregate, example=(
    "differentially_private_aggregate(1.0, 0.1, 0)"
))  # fmt: skip
def differentially_private_aggregate(a):
    """`gradtx.differentially_private_aggregate(..., key=key)`, the noise drawn from optax's key chain: `key`
    is a typed PRNG key or an int seed; None warns and uses `jax.random.key(0)`, the deprecated `seed` warns
    and gives `jax.random.key(seed)`, as optax 0.2.8 does. Its updates are per-example gradients."""
    key = a.key
    if a.seed is not None:
        warnings.warn(
            '"seed" is deprecated and will be removed in optax 0.2.7, use "key".',
            DeprecationWarning,
            stacklevel=3,
        )
        if key is not None:
            raise ValueError("`differentially_private_aggregate`: give only one of `seed` and `key`.")
        key = jax.random.key(a.seed)
    if key is None:
        warnings.warn("Specifying a key will be required in optax 0.2.7.", stacklevel=3)
        key = jax.random.key(0)
    if not (isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)):
        key = jax.random.key(key)  # optax's `canonicalize_key`: an int seed
    return gradtx.differentially_private_aggregate(a.l2_norm_clip, a.noise_multiplier, key=key)


@_factory.per_example_grads
def _dpsgd(a):
    """`chain(differentially_private_aggregate(l2_norm_clip, noise_multiplier, key=jax.random.key(seed)),
    trace(momentum, nesterov) or identity(), scale_by_learning_rate(learning_rate))`; its updates are
    per-example gradients."""
    aggregate = gradtx.differentially_private_aggregate(
        a.l2_norm_clip, a.noise_multiplier, key=jax.random.key(a.seed)
    )
    momentum = trace(decay=a.momentum, nesterov=a.nesterov) if a.momentum is not None else gradtx.identity()
    return gradtx.chain(aggregate, momentum, scale_by_learning_rate(a.learning_rate))


dpsgd = recipe("contrib.dpsgd", gradtx.differentially_private_aggregate, example="dpsgd(0.1, 1.0, 0.1, 0)")(
    _dpsgd
)
