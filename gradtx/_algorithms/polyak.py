"""Polyak step sizes (optax's numbers): `scale_by_polyak`, `polyak_sgd`."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import sq_norm
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate

VARIANTS = ("sps", "sps+")
"""`scale_by_polyak`'s variants: the gap as it is, or its positive part."""


class ScaleByPolyakState(NamedTuple):
    """State of `scale_by_polyak` with a scheduled hyperparameter (`EmptyState()` otherwise, as optax's)."""

    count: _protocol.Count  # int32: completed updates


def _polyak_tree(gs, h, *, name, variant):
    if h.value is None:
        raise _protocol.missing_extra_arg(name, "value", "loss")
    grad_sq_norm = sq_norm(gs)
    gap = jnp.array(h.value - h.f_min).astype(grad_sq_norm.dtype)
    if variant == "sps+":
        gap = jax.nn.relu(gap)
    step = jnp.where(
        grad_sq_norm + h.eps <= jnp.finfo(float).eps,  # no step on a vanishing gradient
        jnp.array(0.0),
        jnp.minimum(gap / (grad_sq_norm + h.eps), h.max_learning_rate),
    )
    return ([step * g for g in gs],)


@_registry.transform()
def scale_by_polyak(
    f_min: _protocol.ScalarOrSchedule = 0.0,
    max_learning_rate: _protocol.ScalarOrSchedule = 1.0,
    eps: _protocol.ScalarOrSchedule = 0.0,
    variant: str = "sps",
) -> _protocol.GradientTransformation:
    r"""Scale the updates by Polyak's step size: the loss's gap to its minimum over the squared update norm.

    With :math:`f` the loss `value` passed to `update` (`tx.update(grads, state, params,
    value=loss)`), :math:`f^\star` a lower bound of it and the norm over every element of
    every leaf:

    .. math::
        u_t = \min\Big(\frac{f - f^\star}{\lVert g_t \rVert^2 + \epsilon}, \gamma_{\max}\Big)\, g_t

    and :math:`u_t = 0` where :math:`\lVert g_t \rVert^2 + \epsilon` is below the float64
    machine epsilon. "sps+" takes the positive part of the gap. The sign is kept: put
    it after a descent step (`polyak_sgd` puts it after `sgd`) or follow it with
    `scale_by_learning_rate`. The numbers of `optax.scale_by_polyak`. A row-sparse gradient
    is densified. `ElementWise` (the norm is over all elements together).

    Args:
      f_min: :math:`f^\star`, a lower bound of the loss (0 for a model that interpolates the data).
      max_learning_rate: :math:`\gamma_{\max}`, the largest step size, >= 0.
      eps: :math:`\epsilon`, added to the squared norm, >= 0.
      variant: "sps" or "sps+".

    Returns:
      An `ElementWise` transform with state `EmptyState()` (`ScaleByPolyakState(count)` when a
      hyperparameter is a schedule); its `update` needs the extra argument `value`.

    Raises:
      ValueError: for a negative rate or `eps`, or an unknown variant.
      MissingExtraArgError: at update time, without `value`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_polyak()
        >>> g = jnp.array([1.0, 2.0])  # |g|^2 = 5
        >>> tx.update(g, tx.init(g), value=2.5)[0]  # min(2.5 / 5, 1) * g
        Array([0.5, 1. ], dtype=float32)

    References:
      Loizou, Vaswani, Laradji, Lacoste-Julien, *Stochastic Polyak step-size for SGD: an
      adaptive learning rate for fast convergence*, AISTATS 2021 (arXiv:2002.10542);
      Garrigos, Gower, Schaipp, *Function value learning: adaptive learning rates based on
      the Polyak stepsize and function splitting in ERM*, 2023 (arXiv:2307.14528) ("sps+").
    """
    fn = "scale_by_polyak"
    _checks.check_finite(fn, "f_min", f_min)
    _checks.check_nonnegative(fn, "max_learning_rate", max_learning_rate)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_one_of(fn, "variant", variant, VARIANTS)
    return update_rule(
        fn,
        ScaleByPolyakState,
        functools.partial(_polyak_tree, name=_checks.api_name(fn), variant=variant),  # the factory called
        hyper={"f_min": f_min, "max_learning_rate": max_learning_rate, "eps": eps},
        count="if_scheduled",
        extra={"value": None},
        over="tree",
    )


@_registry.optimizer("PolyakSGD")
def polyak_sgd(
    max_learning_rate: _protocol.ScalarOrSchedule = 1.0,
    scaling: _protocol.ScalarOrSchedule = 1.0,
    f_min: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 0.0,
    variant: str = "sps",
) -> _protocol.GradientTransformation:
    r"""SGD at Polyak's step size: the loss's gap to `f_min` over the squared gradient norm (optax's numbers).

    `chain(scale_by_learning_rate(scaling), scale_by_polyak(f_min, max_learning_rate, eps,
    variant))`, optax's chain: the step size is computed from the scaled gradient, so
    below the cap the step is :math:`-\frac{f - f^\star}{s \lVert g
    \rVert^2} g` (`scaling`
    :math:`s` divides it), at the cap :math:`-s \gamma_{\max} g`. `update` needs the loss:
    `tx.update(grads, state, params, value=loss)`. A row-sparse gradient is densified.

    Args:
      max_learning_rate: the largest step size, >= 0.
      scaling: multiplies the gradient before the step size is computed, >= 0 (number or schedule).
      f_min: a lower bound of the loss (0 for a model that interpolates the data).
      eps: added to the squared norm, >= 0.
      variant: "sps", or "sps+" (the positive part of the gap).

    Returns:
      An `ElementWise` chain; its `update` needs the extra argument `value`.

    Raises:
      ValueError: for a negative rate, scaling or `eps`, or an unknown variant.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> def f(x):
        ...     return jnp.sum(x**2)
        >>> tx, params = gradtx.polyak_sgd(), jnp.array([1.0, 2.0, 3.0])
        >>> state = tx.init(params)
        >>> for _ in range(2):
        ...     value, grad = jax.value_and_grad(f)(params)
        ...     u, state = tx.update(grad, state, params, value=value)
        ...     params = gradtx.apply_updates(params, u)
        >>> float(f(params))  # 14 / 4 / 4, as optax's documented run
        0.875

    References:
      Loizou, Vaswani, Laradji, Lacoste-Julien, *Stochastic Polyak step-size for SGD: an
      adaptive learning rate for fast convergence*, AISTATS 2021 (arXiv:2002.10542).
    """
    _checks.check_nonnegative("polyak_sgd", "scaling", scaling)
    return chain(scale_by_learning_rate(scaling), scale_by_polyak(f_min, max_learning_rate, eps, variant))


__all__ = ["ScaleByPolyakState", "polyak_sgd", "scale_by_polyak"]
