"""Momentum: `trace`, TF's momentum kernel (`ApplyMomentum`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from gradtx import _base, _checks, _protocol, _tree, sparse


class TraceState(NamedTuple):
    """State of `trace`."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # TF slot "momentum" (the accumulator; starts at 0)


def _trace_leaf(g: jax.Array, accum: jax.Array, momentum: Any, nesterov: bool) -> tuple[jax.Array, jax.Array]:
    mu = _tree.like(momentum, accum)
    accum = accum * mu + g.astype(accum.dtype)
    update = g + (accum * mu).astype(g.dtype) if nesterov else accum.astype(g.dtype)
    return update, accum


@_base.api
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

    def init_fn(params):
        return TraceState(count=_tree.zero_count(), momentum=_tree.zeros_like(params, mu_dtype))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        mu = _tree.resolve(momentum, state.count)
        leaf = sparse.lift(lambda g, a: _trace_leaf(g, a, mu, nesterov))
        new_updates, accum = _tree.split_map(
            "trace",
            leaf,
            2,
            updates,
            state.momentum,
            names=("updates", "state.momentum"),
        )
        return new_updates, TraceState(count=_tree.increment(state.count), momentum=accum)

    return _protocol.ElementWise(init_fn, update_fn)
