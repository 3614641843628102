"""optax's Fromage, optimistic gradient descent and Adam and noisy SGD (top-level optax names), under optax's
names, signatures, defaults and state classes: gradtx's rules and chains, no math.

Where optax's state holds what gradtx keeps otherwise (Fromage's shrink as a third chain
member, the optimistic gradient's `is_initial_step` flag, `add_noise`'s typed key),
`relaid` converts the state at the boundary.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

import gradtx
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx.optax_compat import _transforms as T
from gradtx.optax_compat._aliases import _documented
from gradtx.optax_compat._aliases_modern import relaid
from gradtx.optimizers._modern_more import annealed_noise_std

# --------------------------------------------------------------------------- Fromage


class WeightDecaySchedule(NamedTuple):
    """State of optax's `add_decayed_weights` with a scheduled decay (Fromage's last member)."""

    count: _protocol.Count  # int32: completed updates


@_factory.api
def fromage(learning_rate: Any, min_norm: Any = 1e-6) -> _protocol.GradientTransformation:
    """optax's `fromage`: `gradtx.fromage`, its state in optax's layout.

    optax writes the shrink as a third chain member, `add_decayed_weights(mult - 1)` (a
    negative decay); gradtx's `fromage` wraps the step in `decoupled_weight_decay(..., 1 - mult)`,
    the same numbers. The state here is optax's `(trust ratio, learning rate, decay)` states.

    Args:
      learning_rate: the relative step size (number, scalar array or schedule), >= 0.
      min_norm: the smallest norm of a parameter or update in the trust ratio, >= 0.

    Returns:
      A transform with optax's state: `(EmptyState(), EmptyState(), EmptyState())` for a number,
      `(EmptyState(), ScaleByScheduleState(count), WeightDecaySchedule(count))` for a schedule.

    Raises:
      ValueError: for a negative rate or `min_norm`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.fromage(0.1).init(jnp.zeros(2))
        (EmptyState(), EmptyState(), EmptyState())
    """
    scheduled = _checks.is_schedule(learning_rate)

    def to_optax(state):
        decay = WeightDecaySchedule(state.count) if scheduled else _protocol.EmptyState()
        return (*state.inner_state, decay)

    def from_optax(state):
        count = state[2].count if scheduled else _hyper.zero_count()
        return gradtx.DecoupledWeightDecayState(count, tuple(state[:2]))

    return relaid(gradtx.fromage(learning_rate, min_norm), to_optax, from_optax)


# --------------------------------------------------------------------------- optimistic gradient


class ScaleByOptimisticGradientState(NamedTuple):
    """State of `scale_by_optimistic_gradient` (optax's layout: a flag in place of the count)."""

    is_initial_step: jax.Array  # bool: no step taken yet
    previous_gradient: _protocol.Updates  # the last step's input


@_factory.api
def scale_by_optimistic_gradient(alpha: Any = 1.0, beta: Any = 1.0) -> _protocol.GradientTransformation:
    """optax's `scale_by_optimistic_gradient`: gradtx's, in `ScaleByOptimisticGradientState(is_initial_step,
    previous_gradient)`.

    gradtx keeps a count (so `alpha` and `beta` may be schedules there); optax keeps whether
    no step was taken, which is all its rule reads. Give numbers here, as optax takes.

    Args:
      alpha: the weight of the gradient, finite.
      beta: the weight of the gradient's change (the optimism), >= 0.

    Returns:
      A transform with state `ScaleByOptimisticGradientState(is_initial_step, previous_gradient)`.

    Raises:
      ValueError: for a non-finite `alpha`, or a negative or non-finite `beta`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_optimistic_gradient().init(jnp.zeros(2)).is_initial_step
        Array(True, dtype=bool)
    """

    def to_optax(state):
        return ScaleByOptimisticGradientState(state.count == 0, state.previous_gradient)

    def from_optax(state):
        count = jax.lax.convert_element_type(~state.is_initial_step, _hyper.zero_count().dtype)
        return gradtx.ScaleByOptimisticGradientState(count, state.previous_gradient)

    return relaid(gradtx.scale_by_optimistic_gradient(alpha, beta), to_optax, from_optax)


@_factory.api
@_documented("chain(scale_by_optimistic_gradient(alpha, beta), scale_by_learning_rate(learning_rate))")
def optimistic_gradient_descent(
    learning_rate: Any, alpha: Any = 1.0, beta: Any = 1.0
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        scale_by_optimistic_gradient(alpha, beta), gradtx.scale_by_learning_rate(learning_rate)
    )


@_factory.api
@_documented(
    "chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov), "
    "scale_by_optimistic_gradient(alpha, beta), scale_by_learning_rate(learning_rate))"
)
def optimistic_adam_v2(
    learning_rate: Any,
    *,
    alpha: Any = 1.0,
    beta: Any = 1.0,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-08,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    nesterov: bool = True,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
        scale_by_optimistic_gradient(alpha, beta),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
def optimistic_adam(
    learning_rate: Any,
    optimism: Any = None,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-08,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    *,
    nesterov: bool = True,
) -> _protocol.GradientTransformation:
    """optax's deprecated `optimistic_adam`: `chain(scale_by_adam(...), scale_by_optimistic_gradient(
    alpha=learning_rate, beta=optimism), scale_by_learning_rate(1.0))`.

    The learning rate is the optimistic gradient's `alpha`, so it must be a number;
    `optimism` defaults to it (the paper's choice). Prefer `optimistic_adam_v2`. optax warns
    that this interface is deprecated; this one does not (it stays, for programs written
    against it).

    Args:
      learning_rate: the learning rate (a number).
      optimism: the weight of the step's change; None: `learning_rate`.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      mu_dtype: dtype of `mu` (default: each param's dtype).
      nesterov: use Nesterov's form of the first moment.

    Returns:
      A `GradientTransformation`, state as optax's.

    Raises:
      ValueError: for a schedule as `learning_rate` (optax's message), or hyperparameters out of range.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.optimistic_adam(1e-2)
        >>> len(tx.init(jnp.zeros(2)))
        3
    """
    if _checks.is_schedule(learning_rate):
        raise ValueError(
            "`optimistic_adam`: this version of `optimistic_adam` does not support learning rate schedules "
            "but `optimistic_adam_v2` does."
        )
    optimism = learning_rate if optimism is None else optimism
    return gradtx.chain(
        T.scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
        scale_by_optimistic_gradient(learning_rate, optimism),
        gradtx.scale_by_learning_rate(1.0),
    )


# --------------------------------------------------------------------------- noisy SGD


class AddNoiseState(NamedTuple):
    """State of optax's `add_noise` (optax's field names; gradtx's key does not change from step to step)."""

    count: _protocol.Count  # int32: completed updates
    rng_key: jax.Array  # the PRNG key made from `key` (a typed key, as optax keeps it)


def _seed(key: Any) -> int:
    """An integer seed for gradtx's `add_noise` from optax's `key` (an int, or a PRNG key: its last word)."""
    if key is None or isinstance(key, int):
        return 0 if key is None else key
    data = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return int(jax.device_get(data).ravel()[-1])


@_factory.api
def noisy_sgd(
    learning_rate: Any, eta: Any = 0.01, gamma: Any = 0.55, key: Any = None, *, seed: Any = None
) -> _protocol.GradientTransformation:
    """optax's `noisy_sgd`: `gradtx.noisy_sgd`, its state in optax's layout (`(AddNoiseState(count, rng_key),
    EmptyState())`).

    The rule, defaults and noise distribution are optax's; the noise itself is gradtx's
    (`gradtx.add_noise`), not optax's draws. `key` (an int or a PRNG key) or the deprecated
    `seed` sets it.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      eta: the noise variance at the first step, >= 0.
      gamma: the decay exponent of the variance, >= 0.
      key: an integer or a PRNG key; None: 0.
      seed: optax's deprecated integer seed (give `key` or `seed`, not both).

    Returns:
      A `GradientTransformation`, state as optax's.

    Raises:
      ValueError: for both `key` and `seed`, or a negative rate, `eta` or `gamma`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.noisy_sgd(0.1, key=0).init(jnp.zeros(2))[0].count
        Array(0, dtype=int32)
    """
    if key is not None and seed is not None:
        raise ValueError("`noisy_sgd`: give `key` or `seed` (deprecated), not both.")
    inner = gradtx.noisy_sgd(learning_rate, eta, gamma, _seed(seed if seed is not None else key))

    def to_optax(state):
        return (AddNoiseState(state[0].count, jax.random.wrap_key_data(state[0].key)), *state[1:])

    def from_optax(state):
        return (gradtx.AddNoiseState(state[0].count, jax.random.key_data(state[0].rng_key)), *state[1:])

    return relaid(inner, to_optax, from_optax)


@_factory.api
def add_noise(eta: Any, gamma: Any, key: Any = None, *, seed: Any = None) -> _protocol.GradientTransformation:
    """optax's `add_noise`: Gaussian noise of variance `eta / t**gamma` (state `AddNoiseState`).

    `gradtx.add_noise` with noisy SGD's annealed standard deviation (the rule of
    `gradtx.noisy_sgd`); the distribution is optax's, the draws gradtx's.

    Args:
      eta: the noise variance at the first step, >= 0.
      gamma: the decay exponent of the variance, >= 0.
      key: an integer or a PRNG key; None: 0.
      seed: optax's deprecated integer seed (give `key` or `seed`, not both).

    Returns:
      A `GradientTransformation` with state `AddNoiseState(count, rng_key)`.

    Raises:
      ValueError: for both `key` and `seed`, or a negative `eta` or `gamma`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.add_noise(0.0, 0.55, key=0)  # no noise
        >>> tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))[0]
        Array([1., 1.], dtype=float32)
    """
    if key is not None and seed is not None:
        raise ValueError("`add_noise`: give `key` or `seed` (deprecated), not both.")
    for name, value in (("eta", eta), ("gamma", gamma)):
        _checks.check_nonnegative("add_noise", name, value)
    std = annealed_noise_std(eta, gamma)
    inner = gradtx.add_noise(std, _seed(seed if seed is not None else key), truncated=False)

    def to_optax(state):
        return AddNoiseState(state.count, jax.random.wrap_key_data(state.key))

    def from_optax(state):
        return gradtx.AddNoiseState(state.count, jax.random.key_data(state.rng_key))

    return relaid(inner, to_optax, from_optax)
