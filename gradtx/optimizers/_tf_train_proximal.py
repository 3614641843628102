"""tf.train's proximal optimizers: FTRL, ProximalAdagrad and ProximalGradientDescent.

Their TF kernels apply the learning rate inside a closed-form proximal step, so each is its
building block followed by `scale_by_learning_rate(_DESCEND)` (see `_tf_train.py`).
"""

from __future__ import annotations

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import chain
from gradtx.optimizers._tf_train import _DESCEND
from gradtx.transforms import (
    scale_by_ftrl,
    scale_by_learning_rate,
    scale_by_proximal_adagrad,
    scale_by_proximal_sgd,
)


@_factory.api
def ftrl(
    learning_rate: _protocol.ScalarOrSchedule,
    learning_rate_power: _protocol.ScalarOrSchedule = -0.5,
    initial_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
    l2_shrinkage: _protocol.ScalarOrSchedule = 0.0,
    beta: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""FTRL-proximal: `tf.compat.v1.train.FtrlOptimizer` (`ApplyFtrl`, `ApplyFtrlV2` with shrinkage).

    This is `chain(scale_by_ftrl(...), scale_by_learning_rate(1.0))`: the rate is inside
    the closed form. Row-sparse gradients change the touched rows only, which is how FTRL
    trains huge sparse linear models. A NaN gradient leaves `accum` and `linear` NaN for
    good and pins the param to 0 (as TF does), +-inf does that where it has the param's
    sign and makes the param NaN where not; wrap in `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      learning_rate_power: <= 0; -0.5 is the usual schedule, 0 a fixed rate.
      initial_accumulator_value: start of the `accum` slot, >= 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 (stabilization) regularization strength, >= 0.
      l2_shrinkage: L2 shrinkage (magnitude) strength, >= 0; > 0 selects FtrlV2.
      beta: the paper's beta, >= 0 (added to l2 as `beta / (2 * lr)`).

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `accum`
      and `linear`.

    Raises:
      ValueError: as TF: `initial_accumulator_value` < 0, `learning_rate_power` > 0, a
        negative strength.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.ftrl(1.0, initial_accumulator_value=0.0, l1=0.5)
        >>> params = jnp.zeros(2)
        >>> gradtx.apply_updates(params, tx.update(jnp.array([2.0, 0.25]), tx.init(params), params)[0])
        Array([-0.75,  0.  ], dtype=float32)
    """
    return chain(
        scale_by_ftrl(
            learning_rate, learning_rate_power, initial_accumulator_value, l1, l2, l2_shrinkage, beta
        ),
        scale_by_learning_rate(_DESCEND),
    )


@_factory.api
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
        scale_by_learning_rate(_DESCEND),
    )


@_factory.api
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
    return chain(scale_by_proximal_sgd(learning_rate, l1, l2), scale_by_learning_rate(_DESCEND))


proximal_gradient_descent = proximal_sgd
"""The same as `proximal_sgd` (TF's name: `ProximalGradientDescentOptimizer`)."""
