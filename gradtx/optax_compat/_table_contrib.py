"""The table, `optax.contrib`'s names: AdEMAMix, ADOPT, ACProp, MADGRAD, the learning-rate-free rules, Muon,
SAM, Sophia, MoMo, GaLore, differential privacy, schedule-free learning and the plateau scale.

As `_table.py`: each name is a gradtx factory in optax's signature and state classes, or the recipe
optax writes of them; `gradtx.optax_compat.contrib` gathers them under optax's address.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import gradtx
from gradtx import parallel
from gradtx._algorithms.adopt import adopt_clip_value
from gradtx._algorithms.mechanic import mechanic_transform
from gradtx._algorithms.muon import ScaleByMuonState
from gradtx._algorithms.muon_dims import dims_by_leaf
from gradtx._algorithms.newton_schulz import NS_COEFFS
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.restated import restated
from gradtx.combinators._plateau import plateau_rule
from gradtx.optax_compat import _table_wrappers
from gradtx.optax_compat._mirror import MARKERS, block, forward, recipe, relaid, state_class
from gradtx.optax_compat._table import (
    ScaleByAdamState,
    ScaleByBeliefState,
    adamw,
    add_decayed_weights,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_rms,
    sgd,
    trace,
)
from gradtx.optax_compat._table_schedules import warmup_constant_schedule

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


class MuonState(NamedTuple):
    """optax's `MuonState`: the count, the momentum `mu` and the Newton-Schulz coefficients."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the momentum
    ns_coeffs: jax.Array  # (3,) or (n, 3): the coefficients, as optax keeps them


class ScheduleFreeState(NamedTuple):
    """optax's `ScheduleFreeState`, field for field."""

    b1: Any  # the interpolation between z and its average x, in the params' dtype
    weight_sum: Any  # the sum of the averaging weights so far
    step_count: Any  # int32: this step, 1-based (gradtx's count + 1)
    max_lr: Any  # the largest learning rate so far
    base_optimizer_state: Any  # the base optimizer's state
    z: _protocol.Updates  # the base sequence z_t (starts at the initial params)


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


# --------------------------------------------------------------------------- Muon
_NS_PRESETS = {
    "standard": NS_COEFFS,
    "dion": (
        (4.0848, -6.8946, 2.9270),
        (3.9505, -6.3029, 2.6377),
        (3.7418, -5.5913, 2.3037),
        (2.8769, -3.1427, 1.2046),
        (2.8366, -3.0525, 1.2012),
    ),
}
"""optax's named Newton-Schulz coefficient presets (`muon(ns_coeffs="dion")`)."""


@recipe("contrib.scale_by_muon", gradtx.scale_by_muon)
def scale_by_muon(a):
    """`gradtx.scale_by_muon` with its state as optax's `MuonState(count, mu, ns_coeffs)`."""
    tx = forward(gradtx.scale_by_muon, a)

    def init_fn(params):
        state = tx.init(params)
        return MuonState(state.count, state.momentum, jnp.asarray(a.ns_coeffs))

    def update_fn(updates, state, params=None, **extra_args):
        updates, new = tx.update(updates, ScaleByMuonState(state.count, state.mu), params, **extra_args)
        return updates, MuonState(new.count, new.momentum, state.ns_coeffs)

    return _factory.composite(init_fn, update_fn, tx)


@recipe("contrib.muon", scale_by_muon, gradtx.scale_by_shape, adamw)
def muon(a):
    """`partition({"muon": chain(scale_by_muon, scale_by_shape, add_decayed_weights(weight_decay,
    weight_decay_mask), scale_by_learning_rate), "adam": adamw(...)}, labels)`: "muon" for the 2-D leaves, or,
    with `muon_weight_dimension_numbers`, for the leaves given a `MuonDimensionNumbers`."""
    ns_coeffs = a.ns_coeffs
    if isinstance(ns_coeffs, str):
        _checks.check_one_of("muon", "ns_coeffs", ns_coeffs, tuple(_NS_PRESETS))
        ns_coeffs = _NS_PRESETS[ns_coeffs]
    dims = a.muon_weight_dimension_numbers

    def labels(tree):
        if dims is None:
            return jax.tree.map(lambda x: "muon" if jnp.ndim(x) == 2 else "adam", tree)
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
        by_leaf = dims_by_leaf(dims, tree)
        return treedef.unflatten(["adam" if by_leaf[p] is None else "muon" for p, _ in flat])

    muon_ = scale_by_muon(
        ns_coeffs, a.ns_steps, a.beta, a.eps, a.mu_dtype, nesterov=a.nesterov, adaptive=a.adaptive,
        preconditioning=a.preconditioning, weight_dimension_numbers=dims,
    )  # fmt: skip
    adam_rate = a.learning_rate if a.adam_learning_rate is None else a.adam_learning_rate
    adam = adamw(
        adam_rate,
        a.adam_b1,
        a.adam_b2,
        a.eps,
        a.adam_eps_root,
        a.mu_dtype,
        a.adam_weight_decay,
        nesterov=a.nesterov,
    )
    chain = gradtx.chain(
        muon_,
        gradtx.scale_by_shape(a.consistent_rms, weight_dimension_numbers=dims),
        add_decayed_weights(a.weight_decay, a.weight_decay_mask),
        scale_by_learning_rate(a.learning_rate),
    )
    return _table_wrappers.partition({"muon": chain, "adam": adam}, labels)


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


@recipe("contrib.scale_by_galore", gradtx.scale_by_galore)
def scale_by_galore(a):
    """`gradtx.scale_by_galore`, with optax's default base optimizer (its `scale_by_adam`) and optax's
    empty `(0, 0)` projector where gradtx keeps none."""
    base = scale_by_adam() if a.base_optimizer is None else a.base_optimizer
    return _empty_projectors(
        gradtx.scale_by_galore(a.rank, a.update_proj_gap, a.scale, base, a.weight_dimension_numbers)
    )


def _empty_projectors(tx: Any) -> _protocol.GradientTransformation:
    """`tx` (gradtx's galore) whose state keeps optax's `zeros((0, 0), dtype)` where gradtx's has `None`."""
    inner = _factory.member(tx)
    none = {"is_leaf": lambda x: x is None}

    def filled(state: Any, like: Any) -> Any:  # `like`: the params at init, the previous projectors after
        fill = lambda p, old: jnp.zeros((0, 0), old.dtype) if p is None and old is not None else p  # noqa: E731
        return state._replace(projector=jax.tree.map(fill, state.projector, like, **none))

    def init_fn(params):
        return filled(inner.init(params), params)

    def update_fn(updates, state, params=None, **extra_args):
        updates, new = inner.update(updates, state, params, **extra_args)  # (0, 0) is taken as None
        return updates, filled(new, state.projector)

    return _factory.composite(init_fn, update_fn, inner)


@recipe("contrib.galore", scale_by_galore, add_decayed_weights)
def galore(a):
    """`chain(scale_by_galore(...), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)`."""
    decay = forward(add_decayed_weights, a)
    return gradtx.chain(forward(scale_by_galore, a), decay, scale_by_learning_rate(a.learning_rate))


# --------------------------------------------------------------------------- schedule-free
def _to_optax(state: Any) -> ScheduleFreeState:
    base, sf = state
    return ScheduleFreeState(sf.b1, sf.weight_sum, sf.count + 1, sf.max_lr, base, sf.z)


def _from_optax(state: ScheduleFreeState) -> tuple[Any, Any]:
    sf = gradtx.ScaleByScheduleFreeState(
        state.step_count - 1, state.z, state.b1, state.weight_sum, state.max_lr
    )
    return state.base_optimizer_state, sf


@recipe("contrib.schedule_free", gradtx.schedule_free, example="schedule_free(optax.sgd(1.0), 1.0)")
def schedule_free(a):
    """`gradtx.schedule_free` in optax's `ScheduleFreeState` (its count is optax's `step_count - 1`; a rate
    schedule is called with `step_count`, as optax calls it)."""
    lr = a.learning_rate
    rate = (lambda count: lr(count + 1)) if callable(lr) else lr
    tx = gradtx.schedule_free(a.base_optimizer, rate, a.b1, a.weight_lr_power, state_dtype=a.state_dtype)
    return relaid(tx, _to_optax, _from_optax)


@recipe(
    "contrib.schedule_free_eval_params",
    gradtx.schedule_free_eval_params,
    kind="function",
    returns="The params to evaluate at, `x = (y - (1 - b1) z) / b1`.",
    example="schedule_free_eval_params(contrib.schedule_free_sgd(1.0).init(jnp.ones(1)), jnp.ones(1))",
    api=False,
)
def schedule_free_eval_params(a):
    """`gradtx.schedule_free_eval_params` of a `schedule_free` state (optax's `ScheduleFreeState`, or
    gradtx's)."""
    sf = _from_optax(a.state) if isinstance(a.state, ScheduleFreeState) else a.state
    return gradtx.schedule_free_eval_params(sf, a.params)


def _warmed_up(learning_rate: Any, warmup_steps: int | None) -> Any:
    if warmup_steps is None:
        return learning_rate
    return warmup_constant_schedule(init_value=0, peak_value=learning_rate, warmup_steps=warmup_steps)


@recipe("contrib.schedule_free_sgd", schedule_free, sgd)
def schedule_free_sgd(a):
    """`schedule_free(sgd(lr), lr, ...)` (after `add_decayed_weights` with a decay), `lr` warmed up by
    `warmup_constant_schedule(0, learning_rate, warmup_steps)` when given."""
    lr = _warmed_up(a.learning_rate, a.warmup_steps)
    optimizer = sgd(lr)
    if a.weight_decay is not None:
        optimizer = gradtx.chain(add_decayed_weights(a.weight_decay), optimizer)
    return schedule_free(optimizer, lr, a.b1, a.weight_lr_power, a.state_dtype)


@recipe("contrib.schedule_free_adamw", schedule_free, scale_by_rms)
def schedule_free_adamw(a):
    """`schedule_free(chain(scale_by_rms(b2, eps, eps_in_sqrt=False, bias_correction=True),
    add_decayed_weights(weight_decay), scale_by_learning_rate(lr)), lr, ...)`."""
    lr = _warmed_up(a.learning_rate, a.warmup_steps)
    rms = scale_by_rms(decay=a.b2, eps=a.eps, eps_in_sqrt=False, bias_correction=True)
    optimizer = gradtx.chain(rms, add_decayed_weights(a.weight_decay), scale_by_learning_rate(lr))
    return schedule_free(optimizer, lr, a.b1, a.weight_lr_power, a.state_dtype)
