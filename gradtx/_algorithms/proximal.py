"""Proximal gradient descent and Adagrad (FOBOS): TF's `ApplyProximal*` kernels."""

from __future__ import annotations

from typing import NamedTuple

import jax
from jax import lax

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import DESCEND, scale_by_learning_rate


def _prox(prox: jax.Array, rate: jax.Array, l1: jax.Array, l2: jax.Array) -> jax.Array:
    """FOBOS shrinkage of `prox = var - rate * grad`: soft-threshold by `rate*l1`, scale by 1/(1 + l2*rate).

    `rate` is the scalar `lr` (ProximalGradientDescent) or the per-element Adagrad rate.
    """
    shrunk = _formulas.soft_threshold(prox, rate * l1) / (1.0 + l2 * rate)
    return _formulas.by_l1(l1, shrunk, prox / (1.0 + l2 * rate))


class ScaleByProximalSGDState(NamedTuple):
    """State of `scale_by_proximal_sgd`."""

    count: _protocol.Count  # int32: completed updates


def _proximal_sgd_leaf(g, var, h):
    """ApplyProximalGradientDescent: the FOBOS step from `var - lr g`, as `var - var_new`."""
    lr = h.learning_rate
    return (var - _prox(var - g * lr, lr, h.l1, h.l2),)


@_registry.transform()
def scale_by_proximal_sgd(
    learning_rate: _protocol.ScalarOrSchedule,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Proximal gradient descent (FOBOS), TF's `ApplyProximalGradientDescent`; outputs `var - var_new`.

    .. math::
        v = w - \eta g, \qquad
        w' = \frac{\mathrm{sign}(v)\max(|v| - \eta\ell_1, 0)}{1 + \eta\ell_2}

    With `l1 = l2 = 0` it is plain gradient descent. Row-sparse gradients change the
    touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      l1: L1 regularization strength, >= 0.
      l2: L2 regularization strength, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByProximalSGDState(count)`.

    Raises:
      ValueError: for a negative rate or strength; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_proximal_sgd(0.5, l1=0.5)
        >>> params = jnp.array([1.0, 0.1])
        >>> u, _ = tx.update(jnp.array([1.0, 0.0]), tx.init(params), params)
        >>> params - u  # [1 - 0.5 - 0.25, max(0.1 - 0.25, 0)]
        Array([0.25, 0.  ], dtype=float32)

    References:
      Duchi, Singer, *Efficient online and batch learning using forward backward
      splitting*, JMLR 2009.
    """
    fn = "scale_by_proximal_sgd"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "l1", l1)
    _checks.check_nonnegative(fn, "l2", l2)

    return update_rule(
        fn,
        ScaleByProximalSGDState,
        _proximal_sgd_leaf,
        hyper={"learning_rate": learning_rate, "l1": l1, "l2": l2},
        sparse="rows",  # SparseApplyProximalGradientDescent: the touched rows only
        reads_params=True,
        tf_scalars=True,
    )


class ScaleByProximalAdagradState(NamedTuple):
    """State of `scale_by_proximal_adagrad`."""

    count: _protocol.Count  # int32: completed updates
    accumulator: _protocol.Updates  # TF slot "accumulator" (starts at initial_accumulator_value)


def _proximal_adagrad_leaf(g, accum, var, h):
    """ApplyProximalAdagrad: the FOBOS step with Adagrad's per-element rate, as `var - var_new`."""
    accum = accum + _formulas.abs_sq(g)
    rate = h.learning_rate * lax.rsqrt(accum)
    return var - _prox(var - g * rate, rate, h.l1, h.l2), accum


@_registry.transform()
def scale_by_proximal_adagrad(
    learning_rate: _protocol.ScalarOrSchedule,
    initial_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Proximal Adagrad (FOBOS with Adagrad's rate), TF's `ApplyProximalAdagrad`; outputs `var - var_new`.

    .. math::
        a_t = a_{t-1} + g^2,\quad r = \eta\, a_t^{-1/2},\quad v = w - r g,\quad
        w' = \frac{\mathrm{sign}(v)\max(|v| - r\ell_1, 0)}{1 + r\ell_2}

    Row-sparse gradients change the touched rows only. No epsilon: the accumulator
    starts positive.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_accumulator_value: start of the accumulator; must be > 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 regularization strength, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByProximalAdagradState(count, accumulator)`.

    Raises:
      ValueError: for a non-positive initial value, a negative rate or strength; at
        update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_proximal_adagrad(1.0, initial_accumulator_value=3.0)
        >>> params = jnp.array([1.0])
        >>> u, state = tx.update(jnp.array([1.0]), tx.init(params), params)
        >>> params - u  # 1 - 1 / sqrt(3 + 1)
        Array([0.5], dtype=float32)

    References:
      Duchi, Singer, JMLR 2009 (FOBOS); Duchi, Hazan, Singer, JMLR 2011 (Adagrad).
    """
    fn = "scale_by_proximal_adagrad"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_number(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_positive(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "l1", l1)
    _checks.check_nonnegative(fn, "l2", l2)

    return update_rule(
        fn,
        ScaleByProximalAdagradState,
        _proximal_adagrad_leaf,
        hyper={"learning_rate": learning_rate, "l1": l1, "l2": l2},
        slots={"accumulator": Slot(initial_accumulator_value, nonnegative=True)},
        sparse="rows",  # SparseApplyProximalAdagrad: the touched rows only
        reads_params=True,
        tf_scalars=True,
    )


@_registry.optimizer("ProximalAdagrad")
def proximal_adagrad(
    learning_rate: _protocol.ScalarOrSchedule,
    initial_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Proximal Adagrad: `tf.compat.v1.train.ProximalAdagradOptimizer` (`ApplyProximalAdagrad`).

    This is `chain(scale_by_proximal_adagrad(...), scale_by_learning_rate(1.0))`; row-sparse
    gradients change the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_accumulator_value: start of the accumulator; must be > 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 regularization strength, >= 0.

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "accumulator")`.

    Raises:
      ValueError: for a non-positive initial value or a negative rate or strength.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.proximal_adagrad(1.0, initial_accumulator_value=3.0)
        >>> params = jnp.ones(1)
        >>> gradtx.apply_updates(params, tx.update(jnp.ones(1), tx.init(params), params)[0])
        Array([0.5], dtype=float32)
    """
    return chain(
        scale_by_proximal_adagrad(learning_rate, initial_accumulator_value, l1, l2),
        scale_by_learning_rate(DESCEND),
    )


@_registry.optimizer("proximal_gradient_descent", "ProximalGradientDescent")
def proximal_sgd(
    learning_rate: _protocol.ScalarOrSchedule,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Proximal gradient descent (FOBOS): `tf.compat.v1.train.ProximalGradientDescentOptimizer`.

    This is `chain(scale_by_proximal_sgd(learning_rate, l1, l2), scale_by_learning_rate(1.0))`;
    with `l1 = l2 = 0` it equals `sgd`. Row-sparse gradients change the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      l1: L1 regularization strength, >= 0.
      l2: L2 regularization strength, >= 0.

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a negative rate or strength.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.proximal_sgd(0.5, l1=0.5)
        >>> params = jnp.array([1.0, 0.1])
        >>> gradtx.apply_updates(params, tx.update(jnp.array([1.0, 0.0]), tx.init(params), params)[0])
        Array([0.25, 0.  ], dtype=float32)
    """
    return chain(scale_by_proximal_sgd(learning_rate, l1, l2), scale_by_learning_rate(DESCEND))


proximal_gradient_descent = proximal_sgd
"""The same as `proximal_sgd` (TF's name: `ProximalGradientDescentOptimizer`)."""


__all__ = [
    "ScaleByProximalAdagradState",
    "ScaleByProximalSGDState",
    "proximal_adagrad",
    "proximal_gradient_descent",
    "proximal_sgd",
    "scale_by_proximal_adagrad",
    "scale_by_proximal_sgd",
]
