"""RETURNN's `GradVarianceScaledOptimizer`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByGradVarianceState(NamedTuple):
    """State of `scale_by_grad_variance`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # RETURNN slot "m": running mean of the gradient (starts at 0)
    v: _protocol.Updates  # RETURNN slot "v": running mean of (g - m)^2 (starts at 0)


def _grad_variance_leaf(g, m, v, h):
    """RETURNN's GradVarianceScaled, dense or entry by entry: the gradient times `min(v / (s + eps), 1)`."""
    x = _walk.values_of(g)
    m = sparse.decay_and_add(g, m, h.b1, x * (1 - h.b1))
    variance = jnp.square(x - _walk.rows_of(g, m))
    v = sparse.decay_and_add(g, v, h.b2, variance * (1 - h.b2))
    factor = _walk.rows_of(g, v) / (variance + h.eps)
    return _walk.with_values(g, x * jnp.minimum(factor, 1.0)), m, v


@_registry.transform()
def scale_by_grad_variance(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""RETURNN's GradVarianceScaled: shrink the gradient where it deviates from its mean more than usual.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad s_t = (g_t - m_t)^2, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) s_t, \quad
        u_t = g_t \min\!\Big(\frac{v_t}{s_t + \epsilon}, 1\Big)

    Followed by `scale_by_learning_rate(lr)` this is RETURNN's
    `GradVarianceScaledOptimizer`. Row-sparse gradients follow RETURNN entry by entry.

    Args:
      b1: decay of the running mean, in [0, 1].
      b2: decay of the running variance, in [0, 1].
      eps: added to the current squared deviation, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByGradVarianceState(count, m, v)`.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative `eps`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_grad_variance(b1=0.5, b2=0.5, eps=0.0)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]  # m = 1, s = 1, v = 0.5
        Array([1.], dtype=float32)

    References:
      RETURNN, `returnn/tf/updater.py`: `GradVarianceScaledOptimizer` (the spec's
      RETURNN section pins its arithmetic).
    """
    fn = "scale_by_grad_variance"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0)
    _checks.check_nonnegative(fn, "eps", eps)

    return update_rule(
        fn,
        ScaleByGradVarianceState,
        _grad_variance_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": 0.0, "v": 0.0},
        sparse=_grad_variance_leaf,  # RETURNN's entry-by-entry rule (module docstring)
        tf_scalars=True,
    )


@_registry.optimizer("GradVarianceScaled")
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


__all__ = ["ScaleByGradVarianceState", "grad_variance_scaled", "scale_by_grad_variance"]
