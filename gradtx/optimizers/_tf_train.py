"""The tf.train optimizers (`tf.compat.v1.train.*Optimizer`), each a `chain` of building blocks.

The proximal family (FTRL, ProximalAdagrad, ProximalGradientDescent) is in `_tf_train_proximal.py`.
"""

from __future__ import annotations

from typing import Any

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import chain
from gradtx.transforms import (
    scale_by_adadelta,
    scale_by_adagrad,
    scale_by_adagrad_da,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_rmsprop,
    trace,
)

_DESCEND = 1.0
"""The rate of the last `scale_by_learning_rate` for optimizers whose TF kernel uses the learning
rate inside its update (closed forms, proximal steps, RMSProp's momentum): their building block
takes the rate and outputs the descent step, and this link only turns that step into an update."""


@_factory.api
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


@_factory.api
def momentum(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule,
    *,
    nesterov: bool = False,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Momentum: `tf.compat.v1.train.MomentumOptimizer`, TF's `ApplyMomentum` kernel.

    `accum = momentum * accum + grad`, then `var -= lr * accum` (or, with Nesterov,
    `var -= lr * grad + lr * momentum * accum`). This is
    `chain(trace(momentum, nesterov=nesterov), scale_by_learning_rate(learning_rate))`;
    its slot is `gradtx.get_slot(state, "momentum")`.

    Args:
      learning_rate: the learning rate: a number, a scalar array, or a schedule
        `count -> rate` (inside step t it sees `count = t-1`).
      momentum: the momentum `mu` in [0, 1]: a number, a scalar array or a schedule.
      nesterov: use the Nesterov form (TF's `use_nesterov`).
      mu_dtype: dtype of the accumulator (default: each param's dtype).

    Returns:
      A `GradientTransformation`.

    Raises:
      TypeError: if a hyperparameter has the wrong type.
      ValueError: if `learning_rate` is negative or `momentum` is outside [0, 1].

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.momentum(learning_rate=0.1, momentum=0.9, nesterov=True)
        >>> params = jnp.zeros(2)
        >>> updates, _ = tx.update(jnp.ones(2), tx.init(params), params)
        >>> updates
        Array([-0.19, -0.19], dtype=float32)
    """
    return chain(trace(momentum, nesterov=nesterov, mu_dtype=mu_dtype), scale_by_learning_rate(learning_rate))


@_factory.api
def adagrad(
    learning_rate: _protocol.ScalarOrSchedule, initial_accumulator_value: float = 0.1
) -> _protocol.GradientTransformation:
    r"""Adagrad: TF's `AdagradOptimizer` (no epsilon), not `optax.adagrad`: that is `optax_compat.adagrad`.

    `accumulator += grad**2; var -= lr * grad / sqrt(accumulator)`, the accumulator
    starting at `initial_accumulator_value` (no epsilon). This is
    `chain(scale_by_adagrad(initial_accumulator_value), scale_by_learning_rate(learning_rate))`;
    row-sparse gradients change the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_accumulator_value: start of the accumulator; must be > 0 (as TF requires).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "accumulator")`.

    Raises:
      ValueError: if `initial_accumulator_value` is not positive or the rate is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adagrad(learning_rate=1.0, initial_accumulator_value=3.0)
        >>> tx.update(jnp.array([1.0]), tx.init(jnp.zeros(1)))[0]
        Array([-0.5], dtype=float32)
    """
    return chain(scale_by_adagrad(initial_accumulator_value), scale_by_learning_rate(learning_rate))


@_factory.api
def adagrad_da(
    learning_rate: _protocol.ScalarOrSchedule,
    initial_gradient_squared_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Adagrad dual averaging: `tf.compat.v1.train.AdagradDAOptimizer` (`ApplyAdagradDA`).

    The closed form uses TF's step `T = global_step + 1` read before its increment, which
    is `count + 1` here; TF's `global_step` argument is therefore not needed. This is
    `chain(scale_by_adagrad_da(...), scale_by_learning_rate(1.0))`; row-sparse gradients
    change the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_gradient_squared_accumulator_value: start of the squared accumulator; > 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 regularization strength, >= 0.

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are
      `gradient_accumulator` and `gradient_squared_accumulator`.

    Raises:
      ValueError: for a non-positive initial value or a negative rate or strength.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adagrad_da(1.0, initial_gradient_squared_accumulator_value=3.0)
        >>> params = jnp.array([0.5])
        >>> gradtx.apply_updates(params, tx.update(jnp.array([1.0]), tx.init(params), params)[0])
        Array([-0.5], dtype=float32)
    """
    return chain(
        scale_by_adagrad_da(learning_rate, initial_gradient_squared_accumulator_value, l1, l2),
        scale_by_learning_rate(_DESCEND),
    )


@_factory.api
def adadelta(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    rho: _protocol.ScalarOrSchedule = 0.95,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""Adadelta: TF's `AdadeltaOptimizer` and defaults, not `optax.adadelta`'s (`optax_compat.adadelta`).

    This is `chain(scale_by_adadelta(rho, eps), scale_by_learning_rate(learning_rate))`;
    use `learning_rate=1.0` for the paper's form. Row-sparse gradients change the touched
    rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      rho: the decay rate, in [0, 1].
      eps: the constant inside both square roots, >= 0.

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `accum`
      and `accum_update`.

    Raises:
      ValueError: for `rho` outside [0, 1], a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adadelta(learning_rate=1.0, rho=0.0, eps=1.0)
        >>> round(float(tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))[0][0]), 6)
        -0.948683
    """
    return chain(scale_by_adadelta(rho, eps), scale_by_learning_rate(learning_rate))


@_factory.api
def adam(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam: TF's `AdamOptimizer` (`ApplyAdam`, epsilon-hat), not `optax.adam`: that is `optax_compat.adam`.

    `var -= lr * sqrt(1 - b2**t) / (1 - b1**t) * m / (sqrt(v) + eps)`, with TF's float32
    `beta_power` accumulators. This is
    `chain(scale_by_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))`. Row-sparse
    gradients behave as TF1's Adam: the moments decay on all rows and every row moves
    (see `lazy_adam` for touched rows only).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: epsilon-hat, >= 0.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype); e.g.
        `jnp.bfloat16` halves that slot (not in TF: the numbers then differ from TF's).
      nu_dtype: dtype of the second moment `v` (default: each param's dtype).

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.
      TypeError: if `mu_dtype` or `nu_dtype` is neither a floating-point nor a complex dtype.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adam(learning_rate=0.1)
        >>> [round(float(u), 4) for u in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.1, 0.1]
    """
    return chain(
        scale_by_adam(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def rmsprop(
    learning_rate: _protocol.ScalarOrSchedule,
    decay: _protocol.ScalarOrSchedule = 0.9,
    momentum: _protocol.ScalarOrSchedule | None = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-10,
    *,
    centered: bool = False,
) -> _protocol.GradientTransformation:
    r"""RMSProp: TF's `RMSPropOptimizer` (its kernel and slots), not `optax.rmsprop` (`optax_compat.rmsprop`).

    TF1's defaults and slot initial values: `rms` starts at ONES, `momentum` and `mg` at
    zeros. This is `chain(scale_by_rmsprop(...), scale_by_learning_rate(1.0))`: the rate
    sits inside TF's momentum accumulator. Row-sparse gradients change the touched rows
    only. TF keeps the `momentum` slot (the last step) at momentum 0 too; `momentum=None`
    (optax's default) keeps none: the same updates, one pass over the params less per step,
    but no TF `momentum` slot in a TF1 checkpoint.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      decay: the discount of the mean square, in [0, 1].
      momentum: the momentum, in [0, 1], or None for no momentum slot.
      eps: added to the mean square inside the root, >= 0.
      centered: divide by the centered (variance) estimate.

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are
      `rms`, `momentum` and, when centered, `mg`.

    Raises:
      ValueError: for a decay or momentum outside [0, 1], a negative rate or epsilon.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.rmsprop(0.1, decay=0.5, eps=0.0)
        >>> round(float(tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))[0][0]), 6)
        -0.134164
    """
    return chain(
        scale_by_rmsprop(learning_rate, decay, momentum, eps, centered=centered),
        scale_by_learning_rate(_DESCEND),
    )
