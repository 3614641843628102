"""optax's other optimizers, as chains in optax's form: MADGRAD, Fromage, optimistic gradient descent and
noisy SGD.

Each is the chain of the optax alias of the same name (`optax.contrib.madgrad`, `optax.fromage`,
...), with its defaults and numbers.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, add_noise, chain, decoupled_weight_decay
from gradtx.transforms import (
    scale_by_learning_rate,
    scale_by_madgrad,
    scale_by_optimistic_gradient,
    scale_by_trust_ratio,
)


@_factory.api
def madgrad(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule = 0.9,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-6,
) -> _protocol.GradientTransformation:
    r"""MADGRAD: dual averaging with cube-root adaptivity and momentum by averaging the iterates.

    `chain(add_decayed_weights(weight_decay), scale_by_madgrad(learning_rate, momentum, eps))`:
    the numbers and defaults of `optax.contrib.madgrad`. The weight decay is added to the
    gradient (L2, before the dual average), and the learning rate is inside the step. The
    state keeps a copy of the initial parameters. With a row-sparse gradient the decay reaches
    its rows only (`add_decayed_weights`), then the gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      momentum: the weight of the current parameters in the average, in [0, 1).
      weight_decay: added to the gradient as `weight_decay * params`, >= 0.
      eps: added to the learning rate and to the cube root, >= 0.

    Returns:
      An `ElementWise` chain; its slots are `grad_sum_sq`, `s` and `x0`.

    Raises:
      ValueError: for a negative rate, decay or `eps`, or a `momentum` outside [0, 1).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.madgrad(1.0, momentum=0.0, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> [float(x) for x in tx.update(jnp.array([8.0, -1.0]), tx.init(params), params)[0]]
        [-2.0, 1.0]

    References:
      Defazio, Jelassi, *Adaptivity without compromise: a momentumized, adaptive, dual
      averaged gradient method for stochastic optimization*, JMLR 2022 (arXiv:2101.11075).
    """
    return chain(add_decayed_weights(weight_decay), scale_by_madgrad(learning_rate, momentum, eps))


def _fromage_multiplier(learning_rate: Any) -> Any:
    r"""Fromage's :math:`1/\sqrt{1+\eta^2}` for a rate given as a number or array."""
    return 1 / (1 + learning_rate**2) ** 0.5


def fromage_rates(learning_rate: _protocol.ScalarOrSchedule) -> tuple[Any, Any]:
    r"""Fromage's step size :math:`\eta/\sqrt{1+\eta^2}` and shrinkage :math:`1 - 1/\sqrt{1+\eta^2}`, as optax
    computes them (schedules for a scheduled rate)."""
    if not _checks.is_schedule(learning_rate):
        mult = _fromage_multiplier(learning_rate)
        return learning_rate * mult, 1 - mult

    def rate(count):
        lr = learning_rate(count)
        return _fromage_multiplier(lr) * lr

    def shrink(count):
        return 1 - _fromage_multiplier(learning_rate(count))

    return rate, shrink


@_factory.api
def fromage(
    learning_rate: _protocol.ScalarOrSchedule, min_norm: _protocol.ScalarOrSchedule = 1e-6
) -> _protocol.GradientTransformation:
    r"""Fromage: a step of relative size :math:`\eta` per layer (the trust ratio), then a norm-keeping shrink.

    .. math::
        w \leftarrow \frac{1}{\sqrt{1+\eta^2}}\Big(w - \eta\,\frac{\lVert w\rVert}{\lVert g\rVert}\,g\Big)

    `decoupled_weight_decay(chain(scale_by_trust_ratio(min_norm), scale_by_learning_rate(rate)),
    shrink)` with `rate, shrink = fromage_rates(learning_rate)`: the numbers of `optax.fromage`
    (which writes the shrink as `add_decayed_weights(mult - 1)`, a negative decay; the shrink
    is exact, it is the same product). The step is relative to each layer's norm, so one
    rate suits every layer; the shrink undoes the growth of the norm that a step
    orthogonal to the weights causes. With a row-sparse gradient the step is that of the
    densified gradient and the shrink reaches its rows only (`decoupled_weight_decay`).

    Args:
      learning_rate: the relative step size :math:`\eta` (number, scalar array or schedule), >= 0.
      min_norm: the smallest norm of a parameter or update in the trust ratio, >= 0.

    Returns:
      A `LeafWise` transform (the trust ratio is per leaf); its state is
      `DecoupledWeightDecayState(count, inner_state)`.

    Raises:
      ValueError: for a negative rate or `min_norm`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.fromage(0.75)
        >>> params = jnp.array([3.0, 4.0])
        >>> u, _ = tx.update(jnp.array([0.0, 1.0]), tx.init(params), params)
        >>> [round(float(x), 4) for x in params + u]  # (w - 0.75 * 5 * (0, 1)) / 1.25
        [2.4, 0.2]

    References:
      Bernstein, Vahdat, Yue, Liu, *On the distance between two neural networks and the
      stability of learning*, NeurIPS 2020 (arXiv:2002.03432).
    """
    _checks.check_learning_rate("fromage", learning_rate)
    rate, shrink = fromage_rates(learning_rate)
    return decoupled_weight_decay(chain(scale_by_trust_ratio(min_norm), scale_by_learning_rate(rate)), shrink)


@_factory.api
def optimistic_gradient_descent(
    learning_rate: _protocol.ScalarOrSchedule,
    alpha: _protocol.ScalarOrSchedule = 1.0,
    beta: _protocol.ScalarOrSchedule = 1.0,
) -> _protocol.GradientTransformation:
    r"""Optimistic gradient descent: a step along the gradient extrapolated by its last change.

    `chain(scale_by_optimistic_gradient(alpha, beta), scale_by_learning_rate(learning_rate))`:
    :math:`w \leftarrow w - \eta((\alpha+\beta) g_t - \beta g_{t-1})`, the numbers and defaults
    of `optax.optimistic_gradient_descent`. For min-max games, where plain gradient
    descent-ascent cycles. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      alpha: the weight of the gradient, finite.
      beta: the weight of the gradient's change (the optimism), >= 0.

    Returns:
      An `ElementWise` chain; its slot is `previous_gradient`.

    Raises:
      ValueError: for a negative rate or `beta`, or a non-finite `alpha` or `beta`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.optimistic_gradient_descent(0.1)
        >>> params = jnp.zeros(2)
        >>> u, state = tx.update(jnp.array([1.0, 2.0]), tx.init(params), params)
        >>> u, _ = tx.update(jnp.array([3.0, 2.0]), state, params)
        >>> [round(float(x), 4) for x in u]  # -lr (2 g2 - g1)
        [-0.5, -0.2]

    References:
      Mokhtari, Ozdaglar, Pattathil, *A unified analysis of extra-gradient and optimistic
      gradient methods for saddle point problems: proximal point approach*, AISTATS 2020.
    """
    return chain(scale_by_optimistic_gradient(alpha, beta), scale_by_learning_rate(learning_rate))


def annealed_noise_std(eta: Any, gamma: Any) -> Any:
    r"""The schedule :math:`\sigma_t = \sqrt{\eta / t^\gamma}` of noisy SGD's noise (`t` = count + 1), as
    optax computes it."""

    def std(count):
        return jnp.sqrt(_hyper.resolve(eta, count) / _hyper.increment(count) ** _hyper.resolve(gamma, count))

    return std


@_factory.api
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
