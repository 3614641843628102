"""Plain gradient steps: `scale`, `scale_by_learning_rate`, `scale_by_schedule`, TF's `sgd` and optax's
`noisy_sgd`."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._gradients import add_noise
from gradtx.combinators._scale import scale_by_learning_rate


@_registry.optimizer("gradient_descent", "GradientDescent", "SGD")
def sgd(learning_rate: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""Gradient descent: `tf.compat.v1.train.GradientDescentOptimizer` (`var -= lr * grad`).

    This is `scale_by_learning_rate(learning_rate)`.

    Args:
      learning_rate: the learning rate: a number, a scalar array, or a schedule
        `count -> rate` (inside step t it sees `count = t-1`).

    Returns:
      A `GradientTransformation`.

    Raises:
      TypeError: if `learning_rate` is not a number, scalar array or schedule.
      ValueError: if `learning_rate` is negative or not finite.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sgd(learning_rate=0.5)
        >>> params = jnp.array([1.0, -1.0])
        >>> updates, _ = tx.update(jnp.array([1.0, 1.0]), tx.init(params), params)
        >>> gradtx.apply_updates(params, updates)
        Array([ 0.5, -1.5], dtype=float32)
    """
    return scale_by_learning_rate(learning_rate)


gradient_descent = sgd
"""The same as `sgd` (TF's name: `GradientDescentOptimizer`)."""


def annealed_noise_std(eta: Any, gamma: Any) -> Any:
    r"""The schedule :math:`\sigma_t = \sqrt{\eta / t^\gamma}` of noisy SGD's noise (`t` = count + 1), as
    optax computes it."""

    def std(count):
        return jnp.sqrt(_hyper.resolve(eta, count) / _hyper.increment(count) ** _hyper.resolve(gamma, count))

    return std


@_registry.optimizer("NoisySGD")
def noisy_sgd(
    learning_rate: _protocol.ScalarOrSchedule,
    eta: _protocol.ScalarOrSchedule = 0.01,
    gamma: _protocol.ScalarOrSchedule = 0.55,
    seed: int = 0,
) -> _protocol.GradientTransformation:
    r"""Noisy SGD: SGD on the gradient plus Gaussian noise whose variance decays as :math:`\eta / t^\gamma`.

    `chain(add_noise(annealed_noise_std(eta, gamma), seed, truncated=False),
    scale_by_learning_rate(learning_rate))`: `optax.noisy_sgd`'s rule and defaults, with
    gradtx's noise (`add_noise`: a normal draw per element from `(seed, count, key path)`),
    so the noise has optax's distribution but not its draws. A row-sparse gradient gets
    dense noise.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      eta: the noise variance at the first step, >= 0 (number, scalar array or schedule).
      gamma: the decay exponent of the variance, >= 0 (number, scalar array or schedule).
      seed: the integer seed of the noise.

    Returns:
      A chain with state `(AddNoiseState(count, key), ...)`.

    Raises:
      ValueError: for a negative rate, `eta` or `gamma`.
      TypeError: for a non-integer seed.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.noisy_sgd(0.1, eta=0.0)  # no noise: SGD
        >>> params = jnp.zeros(2)
        >>> [round(float(x), 4) for x in tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0]]
        [-0.2, 0.05]

    References:
      Neelakantan, Vilnis, Le, Sutskever, Kaiser, Kurach, Martens, *Adding gradient noise
      improves learning for very deep networks*, 2015 (arXiv:1511.06807).
    """
    fn = "noisy_sgd"
    for name, value in (("eta", eta), ("gamma", gamma)):
        _checks.check_nonnegative(fn, name, value)
    return chain(
        add_noise(annealed_noise_std(eta, gamma), seed, truncated=False),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["gradient_descent", "noisy_sgd", "sgd"]
