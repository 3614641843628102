"""RETURNN's own optimizers (`returnn/tf/updater.py`), each a `chain` of building blocks."""

from __future__ import annotations

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import chain
from gradtx.transforms import (
    scale_by_amsgrad,
    scale_by_grad_variance,
    scale_by_l2_normalization,
    scale_by_learning_rate,
    scale_by_neural_optimizer1,
)


@_factory.api
def amsgrad(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 0.0,
    *,
    decay: bool = False,
) -> _protocol.GradientTransformation:
    r"""AMSGrad: RETURNN's `AMSGradOptimizer` (no bias correction), not `optax.amsgrad` (`optax_compat`'s).

    This is `chain(scale_by_amsgrad(b1, b2, eps, decay=decay), scale_by_learning_rate(learning_rate))`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root, >= 0 (RETURNN's default 0).
      decay: divide the rate by the square root of the step number (RETURNN's `decay`).

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `m`, `v`
      and `v_hat`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.amsgrad(0.1, b1=0.5, b2=0.75)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]
        Array([-0.1], dtype=float32)
    """
    return chain(scale_by_amsgrad(b1, b2, eps, decay=decay), scale_by_learning_rate(learning_rate))


@_factory.api
def grad_variance_scaled(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""RETURNN's `GradVarianceScaledOptimizer`: SGD damped where the gradient deviates from its running mean.

    This is `chain(scale_by_grad_variance(b1, b2, eps), scale_by_learning_rate(learning_rate))`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the running mean, in [0, 1].
      b2: decay of the running variance, in [0, 1].
      eps: added to the current squared deviation, >= 0.

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `m` and `v`.

    Raises:
      ValueError: for a decay outside [0, 1], a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.grad_variance_scaled(0.1, b1=0.5, b2=0.5, eps=0.0)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]
        Array([-0.1], dtype=float32)
    """
    return chain(scale_by_grad_variance(b1, b2, eps), scale_by_learning_rate(learning_rate))


@_factory.api
def neural_optimizer1(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    decrease_factor: _protocol.ScalarOrSchedule = 0.1,
) -> _protocol.GradientTransformation:
    r"""RETURNN's `NeuralOptimizer1`: SGD, shrinking steps where the gradient's sign disagrees with its mean.

    This is `chain(scale_by_neural_optimizer1(b1, decrease_factor), scale_by_learning_rate(learning_rate))`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the running mean, in [0, 1].
      decrease_factor: the factor for disagreeing signs, >= 0.

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "m")`.

    Raises:
      ValueError: for `b1` outside [0, 1], a negative factor or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.neural_optimizer1(0.5)
        >>> tx.update(jnp.array([1.0, -2.0]), tx.init(jnp.zeros(2)))[0]
        Array([-0.5,  1. ], dtype=float32)
    """
    return chain(scale_by_neural_optimizer1(b1, decrease_factor), scale_by_learning_rate(learning_rate))


@_factory.api
def normalized_sgd(learning_rate: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""RETURNN's `NormalizedSGD`: SGD on each gradient tensor divided by its L2 norm.

    This is `chain(scale_by_l2_normalization(), scale_by_learning_rate(learning_rate))`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.normalized_sgd(0.5).update(jnp.array([3.0, 4.0]), ((), ()))[0]
        Array([-0.3, -0.4], dtype=float32)
    """
    return chain(scale_by_l2_normalization(), scale_by_learning_rate(learning_rate))


__all__ = ["amsgrad", "grad_variance_scaled", "neural_optimizer1", "normalized_sgd"]
