"""The table, optax's names whose state optax lays out otherwise than gradtx's rule: Gaussian noise and noisy
SGD (a typed key), Fromage (its decay a third member of the chain) and the optimistic gradient (whether a step
was taken, for a count), each shown in optax's layout at the boundary (`relaid`).

As `_table.py`, whose building blocks these recipes chain; `gradtx.optax_compat` gathers them.
"""

from __future__ import annotations

from typing import Any

import jax

import gradtx
from gradtx._algorithms.sgd import annealed_noise_std
from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx.optax_compat._mirror import forward, recipe, relaid, state_class
from gradtx.optax_compat._table import _lr, scale_by_adam

# --------------------------------------------------------------------------- noise, Fromage, optimism
AddNoiseState = state_class("AddNoiseState", gradtx.AddNoiseState, {"key": "rng_key"})


def _seed(key: Any) -> int:
    """An integer seed for gradtx's `add_noise` from optax's `key` (an int, or a PRNG key: its last word)."""
    if key is None or isinstance(key, int):
        return 0 if key is None else key
    data = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return int(jax.device_get(data).ravel()[-1])


def _typed_key(state: Any) -> Any:
    return AddNoiseState(state.count, jax.random.wrap_key_data(state.key))


def _raw_key(state: Any) -> Any:
    return gradtx.AddNoiseState(state.count, jax.random.key_data(state.rng_key))


@recipe("add_noise", gradtx.noisy_sgd, example="add_noise(0.01, 0.55, 0)")
def add_noise(a):
    """Gaussian noise of variance `eta / t**gamma`, in optax's `AddNoiseState(count, rng_key)` (a typed key).
    `gradtx.add_noise` with noisy SGD's annealed standard deviation; the distribution is optax's, the draws
    gradtx's. `key` (an int or a PRNG key) or the deprecated `seed` sets it."""
    if a.key is not None and a.seed is not None:
        raise ValueError("`add_noise`: give `key` or `seed` (deprecated), not both.")
    for name in ("eta", "gamma"):
        _checks.check_nonnegative("add_noise", name, getattr(a, name))
    seed = _seed(a.seed if a.seed is not None else a.key)
    return relaid(
        gradtx.add_noise(annealed_noise_std(a.eta, a.gamma), seed, truncated=False), _typed_key, _raw_key
    )


@recipe("noisy_sgd", gradtx.noisy_sgd)
def noisy_sgd(a):
    """`gradtx.noisy_sgd`, its state in optax's layout (`(AddNoiseState(count, rng_key), EmptyState())`): the
    rule, defaults and noise distribution optax's, the draws gradtx's (`key` or the deprecated `seed`)."""
    if a.key is not None and a.seed is not None:
        raise ValueError("`noisy_sgd`: give `key` or `seed` (deprecated), not both.")
    inner = gradtx.noisy_sgd(a.learning_rate, a.eta, a.gamma, _seed(a.seed if a.seed is not None else a.key))
    return relaid(inner, lambda s: (_typed_key(s[0]), *s[1:]), lambda s: (_raw_key(s[0]), *s[1:]))


WeightDecaySchedule = state_class("WeightDecaySchedule", gradtx.ScaleByScheduleState)


@recipe("fromage", gradtx.fromage)
def fromage(a):
    """`gradtx.fromage`, its state optax's `(trust ratio, learning rate, decay)` states: optax writes the
    shrink as a third member, `add_decayed_weights(mult - 1)`; gradtx wraps the step in
    `decoupled_weight_decay(..., 1 - mult)`, the same numbers."""
    scheduled = _checks.is_schedule(a.learning_rate)

    def to_optax(state):
        return (*state.inner_state, WeightDecaySchedule(state.count) if scheduled else _protocol.EmptyState())

    def from_optax(state):
        count = state[2].count if scheduled else _hyper.zero_count()
        return gradtx.DecoupledWeightDecayState(count, tuple(state[:2]))

    return relaid(gradtx.fromage(a.learning_rate, a.min_norm), to_optax, from_optax)


OptimisticState = state_class(
    "ScaleByOptimisticGradientState", gradtx.ScaleByOptimisticGradientState, {"count": "is_initial_step"}
)


@recipe("scale_by_optimistic_gradient", gradtx.scale_by_optimistic_gradient)
def scale_by_optimistic_gradient(a):
    """gradtx's rule in optax's `ScaleByOptimisticGradientState(is_initial_step, previous_gradient)`: gradtx
    keeps a count (so `alpha` and `beta` may be schedules there), optax whether no step was taken."""

    def to_optax(state):
        return OptimisticState(state.count == 0, state.previous_gradient)

    def from_optax(state):
        count = jax.lax.convert_element_type(~state.is_initial_step, _hyper.zero_count().dtype)
        return gradtx.ScaleByOptimisticGradientState(count, state.previous_gradient)

    return relaid(gradtx.scale_by_optimistic_gradient(a.alpha, a.beta), to_optax, from_optax)


@recipe("optimistic_gradient_descent", scale_by_optimistic_gradient)
def optimistic_gradient_descent(a):
    """`chain(scale_by_optimistic_gradient(alpha, beta), scale_by_learning_rate(learning_rate))`."""
    return gradtx.chain(forward(scale_by_optimistic_gradient, a), _lr(a.learning_rate))


@recipe("optimistic_adam_v2", scale_by_adam, scale_by_optimistic_gradient)
def optimistic_adam_v2(a):
    """`chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov), scale_by_optimistic_gradient(
    alpha, beta), scale_by_learning_rate(learning_rate))`."""
    optimism = forward(scale_by_optimistic_gradient, a)
    return gradtx.chain(forward(scale_by_adam, a), optimism, _lr(a.learning_rate))


@recipe("optimistic_adam", scale_by_adam)
def optimistic_adam(a):
    """optax's deprecated form: `chain(scale_by_adam(...), scale_by_optimistic_gradient(alpha=learning_rate,
    beta=optimism), scale_by_learning_rate(1.0))`; the rate must be a number and `optimism` defaults to it.
    Prefer `optimistic_adam_v2` (optax warns here; this one does not)."""
    if _checks.is_schedule(a.learning_rate):
        raise ValueError(
            "`optimistic_adam`: this version of `optimistic_adam` does not support learning rate schedules "
            "but `optimistic_adam_v2` does."
        )
    optimism = a.learning_rate if a.optimism is None else a.optimism
    return gradtx.chain(
        forward(scale_by_adam, a), scale_by_optimistic_gradient(a.learning_rate, optimism), _lr(1.0)
    )
