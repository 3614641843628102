"""RETURNN's own update rules (`returnn/tf/updater.py`): NeuralOptimizer1, GradVarianceScaled, NormalizedSGD.

RETURNN's custom optimizers apply their rule to a sparse gradient entry by entry, without
TF's deduplication: slots decay on all rows, each entry's scaled gradient is added to its
row, and each entry's step is computed with the slot row it reads. These blocks do the
same with a `RowSparse` gradient (a duplicated row gets the sum of its entries' steps).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from gradtx import _base, _checks, _protocol, _tree


class ScaleByNeuralOptimizer1State(NamedTuple):
    """State of `scale_by_neural_optimizer1`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # RETURNN slot "m": running average of the gradient (starts at 0)


def _decayed_add(g, slot, decay, rows):
    """`slot * decay` on all rows, plus `rows` (one per entry of `g`) added to the entries' rows."""
    decayed = slot * _tree.like(decay, slot)
    if _tree.is_row_sparse(g):
        return g.add_to_rows(decayed, rows)
    return decayed + rows


def _read(g, slot):
    """The slot as each entry of `g` sees it (the gathered rows for a row-sparse `g`)."""
    return g.gather(slot) if _tree.is_row_sparse(g) else slot


def _values(g):
    return g.values if _tree.is_row_sparse(g) else g


def _like_g(g, values):
    return g.with_values(values) if _tree.is_row_sparse(g) else values


@_base.api
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

    def init_fn(params):
        return ScaleByNeuralOptimizer1State(_tree.zero_count(), _tree.zeros_like(params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, df_ = _tree.resolve(b1, state.count), _tree.resolve(decrease_factor, state.count)

        def leaf(g, m):
            v = _values(g)
            beta, df = _tree.like(b1_, v), _tree.like(df_, v)
            m = _decayed_add(g, m, beta, v * (1 - beta))
            agree = jnp.sign(_read(g, m)) == jnp.sign(v)
            return _like_g(g, v * jnp.where(agree, jnp.ones_like(v), jnp.ones_like(v) * df)), m

        out, m = _tree.split_map(fn, leaf, 2, updates, state.m, names=("updates", "state.m"))
        return out, ScaleByNeuralOptimizer1State(_tree.increment(state.count), m)

    return _protocol.ElementWise(init_fn, update_fn)


class ScaleByGradVarianceState(NamedTuple):
    """State of `scale_by_grad_variance`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # RETURNN slot "m": running mean of the gradient (starts at 0)
    v: _protocol.Updates  # RETURNN slot "v": running mean of (g - m)^2 (starts at 0)


@_base.api
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

    def init_fn(params):
        return ScaleByGradVarianceState(
            _tree.zero_count(), _tree.zeros_like(params), _tree.zeros_like(params)
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_ = (_tree.resolve(h, state.count) for h in (b1, b2, eps))

        def leaf(g, m, v):
            x = _values(g)
            beta1, beta2, e = (_tree.like(h, x) for h in (b1_, b2_, eps_))
            m = _decayed_add(g, m, beta1, x * (1 - beta1))
            variance = jnp.square(x - _read(g, m))
            v = _decayed_add(g, v, beta2, variance * (1 - beta2))
            factor = _read(g, v) / (variance + e)
            return _like_g(g, x * jnp.minimum(factor, 1.0)), m, v

        out, m, v = _tree.split_map(
            fn, leaf, 3, updates, state.m, state.v, names=("updates", "state.m", "state.v")
        )
        return out, ScaleByGradVarianceState(_tree.increment(state.count), m, v)

    return _protocol.ElementWise(init_fn, update_fn)


class ScaleByL2NormalizationState(NamedTuple):
    """State of `scale_by_l2_normalization` when `eps` is a schedule."""

    count: _protocol.Count  # int32: completed updates


@_base.api
def scale_by_l2_normalization(eps: _protocol.ScalarOrSchedule = 1e-12) -> _protocol.GradientTransformation:
    r"""Divide each gradient tensor by its L2 norm (`tf.nn.l2_normalize(g, None)`): RETURNN's NormalizedSGD.

    .. math:: u = g \,/\, \sqrt{\max(\textstyle\sum g^2, \epsilon)}

    A row-sparse gradient is normalized over its values as they are (duplicates included),
    as TF normalizes the values of an `IndexedSlices`.

    Args:
      eps: the lower bound of the squared norm, >= 0 (TF's default 1e-12).

    Returns:
      A `GradientTransformation`; state `EmptyState()`, or `ScaleByL2NormalizationState(count)`
      for a schedule.

    Raises:
      ValueError: for a negative `eps`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.scale_by_l2_normalization().update(jnp.array([3.0, 4.0]), ())[0]
        Array([0.6, 0.8], dtype=float32)

    References:
      RETURNN, `returnn/tf/updater.py`: `NormalizedSGD`; TensorFlow, `tf.nn.l2_normalize`.
    """
    fn = "scale_by_l2_normalization"
    _checks.check_nonnegative(fn, "eps", eps)
    scheduled = _tree.any_schedule(eps)

    def init_fn(params):
        del params
        return ScaleByL2NormalizationState(_tree.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        e = _tree.resolve(eps, state.count if scheduled else None)

        def leaf(g):
            x = _values(g)
            squared = jnp.sum(x * x)
            return _like_g(g, x * lax.rsqrt(jnp.maximum(squared, _tree.like(e, squared))))

        out = _tree.map_updates(fn, leaf, updates)
        return out, (ScaleByL2NormalizationState(_tree.increment(state.count)) if scheduled else state)

    return _protocol.GradientTransformation(init_fn, update_fn)
