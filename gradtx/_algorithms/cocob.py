"""COCOB-Backprop (optax's numbers): `scale_by_cocob`, `cocob`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import scale
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByCocobState(NamedTuple):
    """State of `scale_by_cocob` (optax's `COCOBState` holds the same without the count)."""

    count: _protocol.Count  # int32: completed updates
    init_particles: _protocol.Updates  # the initial params x_0
    cumulative_gradients: _protocol.Updates  # minus the sum of the gradients
    scale: _protocol.Updates  # the largest |g| so far (starts at eps)
    subgradients: _protocol.Updates  # the sum of |g|
    reward: _protocol.Updates  # the wealth won so far, >= 0


def _cocob_leaf(g, x0, c, scale, total, reward, w, h):
    """COCOB-Backprop (Algorithm 2): the step to the new bet `x0 + C / (L max(G + L, alpha L)) (L + R)`."""
    scale = jnp.maximum(scale, jnp.abs(g))
    total = total + jnp.abs(g)
    reward = jnp.maximum(reward - g * (w - x0), 0)
    c = c - g
    update = -w + (x0 + c / (scale * jnp.maximum(total + scale, h.alpha * scale)) * (scale + reward))
    return update, x0, c, scale, total, reward


@_registry.transform()
def scale_by_cocob(
    alpha: _protocol.ScalarOrSchedule = 100.0, eps: _protocol.ScalarOrSchedule = 1e-8
) -> _protocol.GradientTransformation:
    r"""COCOB-Backprop: each parameter bets a fraction of its wealth on the sign of minus its gradient sum.

    Per element, with :math:`x_0` the initial params:

    .. math::
        L_t = \max(L_{t-1}, |g_t|), \quad G_t = G_{t-1} + |g_t|, \quad
        R_t = \max\big(R_{t-1} - g_t (x_t - x_0), 0\big), \quad \theta_t = \theta_{t-1} - g_t

        x_{t+1} = x_0 + \frac{\theta_t}{L_t \max(G_t + L_t, \alpha L_t)} (L_t + R_t),
        \qquad u_t = x_{t+1} - x_t

    (:math:`L_0 = \epsilon`). The update is the step to the new params: nothing that scales
    it should follow. The numbers of `optax.contrib.scale_by_cocob`. It reads the params; a
    row-sparse gradient is densified (the bet moves every row).

    Args:
      alpha: :math:`\alpha`, bounds the bet early on (the fraction bet is at most :math:`1/\alpha`), > 0.
      eps: :math:`\epsilon`, the initial :math:`L`, > 0.

    Returns:
      An `ElementWise` transform with state
      `ScaleByCocobState(count, init_particles, cumulative_gradients, scale, subgradients, reward)`.

    Raises:
      ValueError: for a non-positive `alpha` or `eps`; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_cocob()
        >>> params = jnp.array([1.0])
        >>> u, state = tx.update(jnp.array([2.0]), tx.init(params), params)
        >>> u.round(6)  # x0 - 2 / (2 * 200) * 2 - x0
        Array([-0.01], dtype=float32)

    References:
      Orabona, Tommasi, *Training deep networks without learning rates through coin
      betting*, NeurIPS 2017 (arXiv:1705.07795), Algorithm 2.
    """
    fn = "scale_by_cocob"
    _checks.check_positive(fn, "alpha", alpha)
    _checks.check_positive(fn, "eps", eps)
    return update_rule(
        fn,
        ScaleByCocobState,
        _cocob_leaf,
        hyper={"alpha": alpha},
        slots={
            "init_particles": jnp.copy,
            "cumulative_gradients": 0.0,
            "scale": Slot(eps),
            "subgradients": 0.0,
            "reward": 0.0,
        },
        reads_params=True,
        real_only="its bets compare gradients with their maxima",
    )


@_registry.optimizer("COCOB")
def cocob(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    alpha: _protocol.ScalarOrSchedule = 100.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""COCOB-Backprop: coin betting, no learning rate (`optax.contrib.cocob`).

    `chain(add_decayed_weights(weight_decay, mask=mask), scale(learning_rate),
    scale_by_cocob(alpha, eps))`: the (decayed) gradient, optionally scaled, is what each
    parameter bets with; see `scale_by_cocob`. A row-sparse gradient is densified.

    Args:
      learning_rate: multiplies the gradient before the bet (e.g. a schedule), >= 0.
      alpha: bounds the bet early on, > 0.
      eps: the initial scale of the gradients, > 0.
      weight_decay: added to the gradient as `weight_decay * params`, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (a `LeafWise` one with a `mask`).

    Raises:
      ValueError: for a bad rate, `alpha`, `eps` or decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.cocob(weight_decay=1e-4)
        >>> params = {"w": jnp.array([1.0, -2.0])}
        >>> state = tx.init(params)
        >>> for _ in range(3):
        ...     u, state = tx.update(params, state, params)
        ...     params = gradtx.apply_updates(params, u)
        >>> bool(abs(params["w"][0]) < 1.0)
        True

    References:
      Orabona, Tommasi, *Training deep networks without learning rates through coin
      betting*, NeurIPS 2017 (arXiv:1705.07795).
    """
    _checks.check_learning_rate("cocob", learning_rate)
    return chain(
        add_decayed_weights(weight_decay, mask=mask), scale(learning_rate), scale_by_cocob(alpha, eps)
    )


__all__ = ["ScaleByCocobState", "cocob", "scale_by_cocob"]
