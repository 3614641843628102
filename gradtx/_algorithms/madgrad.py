"""MADGRAD (optax's numbers): `scale_by_madgrad`, `madgrad`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByMadgradState(NamedTuple):
    """State of `scale_by_madgrad` (optax's `MadgradState` fields)."""

    count: _protocol.Count  # int32: completed updates
    grad_sum_sq: _protocol.Updates  # the weighted sum of squared gradients (starts at 0)
    s: _protocol.Updates  # the weighted sum of gradients (starts at 0)
    x0: _protocol.Params  # the initial parameters (dual averaging's anchor)


def _madgrad_prepare(h, state, extra_args):
    r"""The step's weight :math:`\lambda_t = (\eta + \epsilon)\sqrt{t}`."""
    del state, extra_args
    return {"weight": (h.learning_rate + h.eps) * jnp.sqrt(h.t)}


def _madgrad_leaf(g, grad_sum_sq, s, x0, w, h):
    grad_sum_sq = grad_sum_sq + (h.weight * _formulas.abs_sq(g)).astype(g.dtype)
    s = s + (h.weight * g).astype(g.dtype)
    z = x0 - s / (jnp.cbrt(grad_sum_sq) + h.eps)
    return (1 - h.momentum) * z + h.momentum * w - w, grad_sum_sq, s, x0


@_registry.transform()
def scale_by_madgrad(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule = 0.9,
    eps: _protocol.ScalarOrSchedule = 1e-6,
) -> _protocol.GradientTransformation:
    r"""MADGRAD's step: dual averaging from the initial parameters, scaled by a cube root, then averaged.

    .. math::
        \lambda_t = (\eta_t + \epsilon)\sqrt{t}, \quad
        s_t = s_{t-1} + \lambda_t g_t, \quad G_t = G_{t-1} + \lambda_t g_t^2, \\
        z_t = x_0 - \frac{s_t}{\sqrt[3]{G_t} + \epsilon}, \qquad
        u_t = (1-\mu) z_t + \mu\, w_t - w_t

    The update is the whole step to the new parameters (the learning rate is inside it, so
    no `scale_by_learning_rate` follows): the parameters are averaged towards the
    dual-averaging iterate :math:`z_t` with weight :math:`1-\mu`. The state keeps the
    initial parameters :math:`x_0`. These are the numbers and defaults of
    `optax.contrib.scale_by_madgrad`. A row-sparse gradient is densified first; complex
    parameters are refused (a cube root of the sum of squares).

    Args:
      learning_rate: the learning rate :math:`\eta` (number, scalar array or schedule), >= 0.
      momentum: :math:`\mu`, the weight of the current parameters in the average, in [0, 1).
      eps: added to the learning rate and to the cube root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByMadgradState(count, grad_sum_sq, s, x0)`;
      its `update` needs `params`.

    Raises:
      ValueError: for a negative `learning_rate` or `eps`, or a `momentum` outside [0, 1).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_madgrad(1.0, momentum=0.0, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([8.0, -1.0]), tx.init(params), params)[0]  # -g / cbrt(g^2)
        Array([-2.,  1.], dtype=float32)

    References:
      Defazio, Jelassi, *Adaptivity without compromise: a momentumized, adaptive, dual
      averaged gradient method for stochastic optimization*, JMLR 2022 (arXiv:2101.11075).
    """
    fn = "scale_by_madgrad"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_in_range(fn, "momentum", momentum, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)

    return update_rule(
        fn,
        ScaleByMadgradState,
        _madgrad_leaf,
        hyper={"learning_rate": learning_rate, "momentum": momentum, "eps": eps},
        slots={"grad_sum_sq": SQUARES, "s": 0.0, "x0": jnp.copy},  # x0 = the initial params
        prepare=_madgrad_prepare,
        reads_params=True,
        real_only="its step divides by the cube root of a sum of squares",
    )


@_registry.optimizer("MADGRAD")
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


__all__ = ["ScaleByMadgradState", "madgrad", "scale_by_madgrad"]
