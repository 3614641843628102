"""Momentum: `trace`, TF's momentum kernel (`ApplyMomentum`)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.rule import Slot, update_rule


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


@_factory.api
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
