"""RETURNN's `NeuralOptimizer1`."""

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

_SIGNS = "it compares the signs of the gradient and its moving average"


class ScaleByNeuralOptimizer1State(NamedTuple):
    """State of `scale_by_neural_optimizer1`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # RETURNN slot "m": running average of the gradient (starts at 0)


def _neural_optimizer1_leaf(g, m, h):
    """RETURNN's rule, dense or entry by entry: `m` decays; `g` is kept where its sign agrees with `m`'s."""
    v = _walk.values_of(g)
    m = sparse.decay_and_add(g, m, h.b1, v * (1 - h.b1))
    agree = jnp.sign(_walk.rows_of(g, m)) == jnp.sign(v)
    return _walk.with_values(
        g, v * jnp.where(agree, jnp.ones_like(v), jnp.ones_like(v) * h.decrease_factor)
    ), m


@_registry.transform()
def scale_by_neural_optimizer1(
    b1: _protocol.ScalarOrSchedule = 0.9, decrease_factor: _protocol.ScalarOrSchedule = 0.1
) -> _protocol.GradientTransformation:
    r"""RETURNN's NeuralOptimizer1: keep the gradient where its sign agrees with its mean, else shrink it.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad
        u_t = g_t \cdot \begin{cases} 1 & \mathrm{sign}(m_t) = \mathrm{sign}(g_t) \\
            d & \text{otherwise} \end{cases}

    A cheap form of Bello et al.'s `g * exp(sign(g) * sign(m))`; followed by
    `scale_by_learning_rate(lr)` this is RETURNN's `NeuralOptimizer1`. Row-sparse gradients
    follow RETURNN entry by entry (see the module docstring).

    Args:
      b1: decay of the running mean, in [0, 1].
      decrease_factor: the factor `d` for disagreeing signs (the paper's e^-2 ~ 0.135).

    Returns:
      A `GradientTransformation` with state `ScaleByNeuralOptimizer1State(count, m)`.

    Raises:
      ValueError: if `b1` is outside [0, 1] or `decrease_factor` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_neural_optimizer1(b1=0.9, decrease_factor=0.1)
        >>> state = tx.init(jnp.zeros(2))
        >>> _, state = tx.update(jnp.array([1.0, 1.0]), state)
        >>> [round(float(u), 4) for u in tx.update(jnp.array([1.0, -0.5]), state)[0]]  # m = [0.19, 0.04]
        [1.0, -0.05]

    References:
      Bello, Zoph, Vasudevan, Le, *Neural optimizer search with reinforcement learning*,
      ICML 2017.
    """
    fn = "scale_by_neural_optimizer1"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0)
    _checks.check_nonnegative(fn, "decrease_factor", decrease_factor)

    return update_rule(
        fn,
        ScaleByNeuralOptimizer1State,
        _neural_optimizer1_leaf,
        hyper={"b1": b1, "decrease_factor": decrease_factor},
        slots={"m": 0.0},
        sparse=_neural_optimizer1_leaf,  # RETURNN's entry-by-entry rule (module docstring)
        tf_scalars=True,
        real_only=_SIGNS,
    )


@_registry.optimizer("NeuralOptimizer1")
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


__all__ = ["ScaleByNeuralOptimizer1State", "neural_optimizer1", "scale_by_neural_optimizer1"]
