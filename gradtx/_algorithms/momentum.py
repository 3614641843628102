"""Momentum: `trace` (TF's `ApplyMomentum`), TF's `momentum`, contrib's `momentumw`, and torch's SGD rule."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, first_step, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import decoupled_weight_decay


class TraceState(NamedTuple):
    """State of `trace`."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # TF slot "momentum" (the accumulator; starts at 0)


def _trace_leaf(g, accum, h, *, nesterov: bool):
    """ApplyMomentum: `accum = mu accum + g`; the update is `accum`, or `g + mu accum` (Nesterov).

    The accumulator is rounded to its slot's dtype (`mu_dtype`) before the step uses it.
    """
    accum = (accum * h.momentum + g).astype(accum.dtype)
    return (g + accum * h.momentum if nesterov else accum), accum


@_registry.transform()
def trace(
    momentum: _protocol.ScalarOrSchedule, *, nesterov: bool = False, mu_dtype: Any = None
) -> _protocol.GradientTransformation:
    r"""Accumulate the updates with momentum, exactly as TF's `ApplyMomentum` kernel.

    .. math::
        a_t = \mu\, a_{t-1} + g_t, \qquad
        u_t = \begin{cases} g_t + \mu\, a_t & \text{nesterov} \\ a_t & \text{otherwise} \end{cases}

    Followed by `scale_by_learning_rate(lr)` this is `tf.compat.v1.train.MomentumOptimizer`:
    `var -= lr * accum` (or `var -= lr * grad + lr * momentum * accum` with Nesterov). It is
    not Keras' momentum, which folds the learning rate into the accumulator.

    Row-sparse gradients change the touched rows only (`SparseApplyMomentum`).

    Args:
      momentum: the momentum `mu` in [0, 1]: a number, a scalar array or a schedule.
      nesterov: use the Nesterov form (TF's `use_nesterov`).
      mu_dtype: dtype of the accumulator (default: each param's dtype).

    Returns:
      A `GradientTransformation` with state `TraceState(count, momentum)`.

    Raises:
      TypeError: if `momentum` is not a number or schedule, or `nesterov` is not a bool.
      ValueError: if `momentum` is outside [0, 1].

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.trace(momentum=0.9)
        >>> state = tx.init(jnp.zeros(2))
        >>> u, state = tx.update(jnp.ones(2), state)
        >>> u, state = tx.update(jnp.ones(2), state)
        >>> u
        Array([1.9, 1.9], dtype=float32)

    References:
      Polyak, *Some methods of speeding up the convergence of iteration methods*, 1964;
      Sutskever et al., *On the importance of initialization and momentum*, ICML 2013.
    """
    _checks.check_in_range("trace", "momentum", momentum, 0.0, 1.0)
    _checks.check_bool("trace", "nesterov", nesterov)
    _checks.check_float_dtype("trace", "mu_dtype", mu_dtype)

    return update_rule(
        "trace",
        TraceState,
        functools.partial(_trace_leaf, nesterov=nesterov),
        hyper={"momentum": momentum},
        slots={"momentum": Slot(0.0, mu_dtype)},
        sparse="rows",  # SparseApplyMomentum: the touched rows only
        tf_scalars=True,
    )


@_registry.optimizer("Momentum")
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


@_registry.optimizer("MomentumW")
def momentumw(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule,
    weight_decay: _protocol.ScalarOrSchedule,
    *,
    nesterov: bool = False,
    mask: Any = None,
    scale_decay_by_learning_rate: bool = False,
) -> _protocol.GradientTransformation:
    r"""MomentumW: `tf.contrib.opt.MomentumWOptimizer`: `var -= weight_decay * var`, then TF's momentum step.

    The decay is not multiplied by the learning rate (`scale_decay_by_learning_rate=True`
    for that convention); `mask` plays `decay_var_list`; a row-sparse gradient decays and
    moves its rows only. This is `decoupled_weight_decay(momentum(...), weight_decay, mask=mask)`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      momentum: the momentum, in [0, 1].
      weight_decay: the decay factor, >= 0.
      nesterov: use the Nesterov form (TF's `use_nesterov`).
      mask: which params decay (tree of bools, function or key-path patterns); all if None.
      scale_decay_by_learning_rate: multiply the decay by the learning rate.

    Returns:
      A `GradientTransformation`; the momentum slot is in `state.inner_state`.

    Raises:
      ValueError: for a bad rate, momentum or weight decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.momentumw(0.1, 0.9, 0.5)
        >>> params = jnp.array([2.0])
        >>> tx.update(jnp.array([1.0]), tx.init(params), params)[0]
        Array([-1.1], dtype=float32)
    """
    _checks.check_bool("momentumw", "scale_decay_by_learning_rate", scale_decay_by_learning_rate)
    momentum_chain = chain(trace(momentum, nesterov=nesterov), scale_by_learning_rate(learning_rate))
    return decoupled_weight_decay(
        momentum_chain,
        weight_decay,
        mask=mask,
        learning_rate=learning_rate if scale_decay_by_learning_rate else None,
    )


class TorchSGDState(NamedTuple):
    """State of torch's SGD rule."""

    count: _protocol.Count  # int32: completed updates (torch keeps no step for SGD)
    momentum_buffer: _protocol.Updates  # torch's "momentum_buffer" (None for momentum 0)


def _sgd_leaf(g, buf, h, *, nesterov: bool, dampened: bool):
    """`_single_tensor_sgd`: the buffer starts as the first gradient, then `m buf + (1 - dampening) g`."""
    if buf is None:
        return g, None
    if dampened:
        buf = jnp.where(h.first, g, buf * h.momentum + g * (1 - h.dampening))
    else:  # dampening 0: a zero buffer gives the first gradient as it is
        buf = buf * h.momentum + g
    return (g + buf * h.momentum if nesterov else buf), buf


def sgd_rule(momentum: float, dampening: float, *, nesterov: bool) -> _protocol.GradientTransformation:
    """torch's SGD direction (momentum buffer, dampening, Nesterov), before the rate."""
    leaf = functools.partial(_sgd_leaf, nesterov=nesterov, dampened=dampening != 0)
    return update_rule(
        "torch_sgd", TorchSGDState, leaf, hyper={"momentum": momentum, "dampening": dampening},
        slots={"momentum_buffer": 0.0 if momentum != 0 else None}, real_only=_REAL_ONLY, prepare=first_step,
    )  # fmt: skip


__all__ = ["TraceState", "momentum", "momentumw", "trace"]
