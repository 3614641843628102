"""Optimistic gradient descent and Adam (optax's numbers)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import scale_by_bias_corrected_adam
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import first_step, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByOptimisticGradientState(NamedTuple):
    """State of `scale_by_optimistic_gradient`."""

    count: _protocol.Count  # int32: completed updates
    previous_gradient: _protocol.Updates  # the last step's input (starts at 0; unused at the first step)


def _optimistic_leaf(g, previous_gradient, h):
    previous = jnp.where(h.first, g, previous_gradient)  # at the first step there is none: g itself
    return (h.alpha + h.beta) * g - h.beta * previous, g


@_registry.transform()
def scale_by_optimistic_gradient(
    alpha: _protocol.ScalarOrSchedule = 1.0, beta: _protocol.ScalarOrSchedule = 1.0
) -> _protocol.GradientTransformation:
    r"""The optimistic gradient: the gradient extrapolated by its change, :math:`g_t + \beta (g_t - g_{t-1})`.

    .. math:: u_t = (\alpha + \beta)\, g_t - \beta\, g_{t-1}, \qquad g_0 := g_1

    Optimistic gradient descent approximates the extra-gradient method with one gradient per
    step; in min-max games (GANs) it converges where gradient descent cycles. With
    :math:`\alpha = \beta = 1` it is :math:`2 g_t - g_{t-1}` (Daskalakis et al.); `alpha`
    scales the gradient, `beta` the optimism. At the first step the previous gradient is
    the gradient itself (optax issue 1082), so :math:`u_1 = \alpha g_1`. These are the
    numbers and defaults of `optax.scale_by_optimistic_gradient`. A row-sparse gradient is
    densified first.

    Args:
      alpha: the weight of the gradient (number, scalar array or schedule), finite.
      beta: the weight of the gradient's change, the optimism (number, scalar array or schedule), >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByOptimisticGradientState(count, previous_gradient)`.

    Raises:
      ValueError: for a non-finite `alpha`, or a negative or non-finite `beta`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_optimistic_gradient()
        >>> u, state = tx.update(jnp.array([1.0, 2.0]), tx.init(jnp.zeros(2)))
        >>> u, tx.update(jnp.array([3.0, 2.0]), state)[0]  # g_1, then 2 g_2 - g_1
        (Array([1., 2.], dtype=float32), Array([5., 2.], dtype=float32))

    References:
      Daskalakis, Ilyas, Syrgkanis, Zeng, *Training GANs with optimism*, ICLR 2018; Mokhtari,
      Ozdaglar, Pattathil, *A unified analysis of extra-gradient and optimistic gradient methods
      for saddle point problems: proximal point approach*, AISTATS 2020.
    """
    fn = "scale_by_optimistic_gradient"
    _checks.check_finite(fn, "alpha", alpha)
    _checks.check_finite(fn, "beta", beta)
    _checks.check_nonnegative(fn, "beta", beta)

    return update_rule(
        fn,
        ScaleByOptimisticGradientState,
        _optimistic_leaf,
        hyper={"alpha": alpha, "beta": beta},
        slots={"previous_gradient": 0.0},
        prepare=first_step,
    )


@_registry.optimizer("OptimisticGradientDescent", "OGD")
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


@_registry.optimizer("OptimisticAdam")
def optimistic_adam(
    learning_rate: _protocol.ScalarOrSchedule,
    *,
    alpha: _protocol.ScalarOrSchedule = 1.0,
    beta: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    mu_dtype: Any = None,
    nesterov: bool = True,
) -> _protocol.GradientTransformation:
    r"""Optimistic Adam: Adam's step extrapolated by its last change, for min-max games.

    `chain(scale_by_bias_corrected_adam(b1, b2, eps, eps_root, nesterov=nesterov,
    mu_dtype=mu_dtype), scale_by_optimistic_gradient(alpha, beta),
    scale_by_learning_rate(learning_rate))`: with :math:`r_t` Adam's step,
    :math:`w \leftarrow w - \eta((\alpha+\beta) r_t - \beta r_{t-1})`. These are the numbers and
    defaults of `optax.optimistic_adam_v2` (Nesterov's first moment by default), and those of
    optax's older `optax.optimistic_adam(learning_rate)`, whose learning rate is the optimistic
    gradient's `alpha` and default `optimism` (`optax_compat.optimistic_adam` takes its
    arguments). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      alpha: the weight of Adam's step, finite.
      beta: the weight of the step's change (the optimism), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype).
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` chain; its slots are `m`, `v` and `previous_gradient`.

    Raises:
      ValueError: for a `b1` / `b2` outside [0, 1), a negative `eps`, `eps_root`, `beta` or rate, or
        a non-finite `alpha` or `beta`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.optimistic_adam(0.1, eps=0.0, nesterov=False)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: alpha times Adam's, -lr sign(g)
        [-0.1, 0.1]

    References:
      Daskalakis, Ilyas, Syrgkanis, Zeng, *Training GANs with optimism*, ICLR 2018.
    """
    return chain(
        scale_by_bias_corrected_adam(b1, b2, eps, eps_root, nesterov=nesterov, mu_dtype=mu_dtype),
        scale_by_optimistic_gradient(alpha, beta),
        scale_by_learning_rate(learning_rate),
    )


__all__ = [
    "ScaleByOptimisticGradientState",
    "optimistic_adam",
    "optimistic_gradient_descent",
    "scale_by_optimistic_gradient",
]
