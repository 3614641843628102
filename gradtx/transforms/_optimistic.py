"""Optimistic gradients for min-max games: `scale_by_optimistic_gradient`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.rule import update_rule


class ScaleByOptimisticGradientState(NamedTuple):
    """State of `scale_by_optimistic_gradient`."""

    count: _protocol.Count  # int32: completed updates
    previous_gradient: _protocol.Updates  # the last step's input (starts at 0; unused at the first step)


def _optimistic_leaf(g, previous_gradient, h):
    previous = jnp.where(h.count == 0, g, previous_gradient)  # at the first step there is none: g itself
    return (h.alpha + h.beta) * g - h.beta * previous, g


@_factory.api
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
    )
