"""The sign family: `scale_by_addsign`, `scale_by_powersign` (TF's `ApplyAddSign` / `ApplyPowerSign`)
and `scale_by_neural_optimizer1` (RETURNN's NeuralOptimizer1).

Each scales each gradient entry by how its sign agrees with the sign of a moving average
`m` of the gradients (Bello et al.'s rules found by neural optimizer search). The
learning rate multiplies the whole step, so the aliases are
`chain(scale_by_addsign(...), scale_by_learning_rate(lr))`.

NeuralOptimizer1's sparse rule is RETURNN's, which applies its rule entry by entry without
TF's deduplication: the slot decays on all rows, each entry's scaled gradient is added to its
row, and each entry's step is computed with the slot row it reads (a duplicated row gets the
sum of its entries' steps).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse


class ScaleByAddSignState(NamedTuple):
    """State of `scale_by_addsign`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": moving average of the gradients (starts at 0)


class ScaleByPowerSignState(NamedTuple):
    """State of `scale_by_powersign`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": moving average of the gradients (starts at 0)


def _check_sign_decay(fn: str, sign_decay: Any) -> None:
    if sign_decay is not None:
        _checks.check_finite(fn, "sign_decay", sign_decay)


def _sign_transform(fn, state_cls, beta, sign_decay, resolve_extra, multiplier):
    """The shared moment update and tree walk.

    `resolve_extra(count)` returns the block's own scalars for this step;
    `multiplier(sign_gm, sign_decay, extra, like, row_sparse)` returns the factor of the gradient.
    """

    def init_fn(params):
        return state_cls(count=_tree.zero_count(), m=_tree.zeros_like(params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        beta_ = _tree.resolve(beta, state.count)
        decay_ = 1.0 if sign_decay is None else _tree.resolve(sign_decay, state.count)
        extra = resolve_extra(state.count)

        def leaf(g, m):
            if _tree.is_row_sparse(g):
                # contrib's _apply_sparse: m = m*beta + densify(g)*(1-beta) on ALL rows (untouched rows
                # decay), the variable moves on the touched rows only.
                g = g.deduplicated()
                b = _tree.like(beta_, g.values)
                m = sparse.decay_and_add(g, m, b, g.values * (1 - b))
                sign_gm = jnp.sign(g.gather(m)) * jnp.sign(g.values)
                rows = multiplier(sign_gm, decay_, extra, g.values, True) * g.values
                return g.with_values(g.zero_padding(rows)), m
            m = _tree.moment_blend(m, g, _tree.like(beta_, g))
            sign_gm = jnp.sign(g) * jnp.sign(m)  # the NEW m; sign(0) = 0
            return multiplier(sign_gm, decay_, extra, g, False) * g, m

        out, m = _tree.split_map(fn, leaf, 2, updates, state.m, names=("updates", "state.m"))
        return out, state_cls(count=_tree.increment(state.count), m=m)

    return _protocol.ElementWise(init_fn, update_fn)


@_base.api
@_base.real_only("it compares the signs of the gradient and its moving average")
def scale_by_addsign(
    alpha: _protocol.ScalarOrSchedule = 1.0,
    beta: _protocol.ScalarOrSchedule = 0.9,
    sign_decay: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""AddSign's scaling, exactly TF's `ApplyAddSign`: grow the step where gradient and momentum agree.

    .. math::
        m_t = m_{t-1}\beta + g_t(1-\beta), \quad
        u_t = \big(\alpha + d_t\,\mathrm{sign}(g_t)\,\mathrm{sign}(m_t)\big)\, g_t

    with :math:`\mathrm{sign}(0) = 0` and :math:`d_t` the sign decay (1 when `sign_decay`
    is None), a schedule evaluated at `count = t-1` (TF's `global_step`, see
    `gradtx.schedules.linear_sign_decay` and friends). Followed by
    `scale_by_learning_rate(lr)` this is `tf.contrib.opt.AddSignOptimizer`.

    A row-sparse gradient follows contrib's `_apply_sparse`: `m` is updated densely
    (:math:`m \leftarrow m\beta + \mathrm{densify}(g)(1-\beta)`, so `m` decays on the
    untouched rows too, an O(table) step), and the output is row-sparse: the variable
    changes on the touched rows only.

    Args:
      alpha: the constant part of the multiplier, finite (number, scalar array or schedule).
      beta: the decay of the moving average `m`, in [0, 1].
      sign_decay: None (1.0), a finite number or scalar array, or a schedule
        `count -> value` multiplying the sign agreement.

    Returns:
      A `GradientTransformation` with state `ScaleByAddSignState(count, m)`.

    Raises:
      TypeError: if a hyperparameter is not a number, scalar array or schedule.
      ValueError: if `beta` is outside [0, 1] or `alpha` or `sign_decay` is not finite.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import scale_by_addsign
        >>> tx = scale_by_addsign(alpha=1.0, beta=0.5, sign_decay=0.5)
        >>> u, state = tx.update(jnp.array([2.0, -1.0, 0.0]), tx.init(jnp.zeros(3)))
        >>> u, state.m  # signs agree: (1 + 0.5) * g
        (Array([ 3. , -1.5,  0. ], dtype=float32), Array([ 1. , -0.5,  0. ], dtype=float32))

    References:
      Bello, Zoph, Vasudevan, Le, *Neural optimizer search with reinforcement learning*,
      ICML 2017 (AddSign, section 5).
    """
    fn = "scale_by_addsign"
    _checks.check_finite(fn, "alpha", alpha)
    _checks.check_in_range(fn, "beta", beta, 0.0, 1.0)
    _check_sign_decay(fn, sign_decay)

    def resolve_extra(count):
        return _tree.resolve(alpha, count)

    def multiplier(sign_gm, decay, alpha_, like, row_sparse):
        del row_sparse  # the kernel and contrib's sparse path agree: alpha + decay * sign_gm
        return _tree.like(alpha_, like) + _tree.like(decay, like) * sign_gm

    return _sign_transform(fn, ScaleByAddSignState, beta, sign_decay, resolve_extra, multiplier)


def _logbase(base: Any) -> Any:
    """`log(base)` for a known base as contrib computes it (`math.log`, in double); None when not known."""
    if _checks.is_schedule(base) or isinstance(base, jax.core.Tracer):
        return None
    return math.log(float(base))


@_base.api
@_base.real_only("it compares the signs of the gradient and its moving average")
def scale_by_powersign(
    base: _protocol.ScalarOrSchedule = math.e,
    beta: _protocol.ScalarOrSchedule = 0.9,
    sign_decay: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""PowerSign's scaling, exactly TF's `ApplyPowerSign`: multiply or divide the step by `base`.

    .. math::
        m_t = m_{t-1}\beta + g_t(1-\beta), \quad
        u_t = \exp\big(\log(b)\, d_t\,\mathrm{sign}(g_t)\,\mathrm{sign}(m_t)\big)\, g_t

    with :math:`\mathrm{sign}(0) = 0` and :math:`d_t` the sign decay (1 when `sign_decay`
    is None), a schedule evaluated at `count = t-1` (TF's `global_step`). As in contrib,
    :math:`\log(b)` is computed once in double precision (`math.log(base)`) and then
    rounded to the leaf dtype; the scalar :math:`\log(b) d_t` is formed first. Followed by
    `scale_by_learning_rate(lr)` this is `tf.contrib.opt.PowerSignOptimizer`.

    A row-sparse gradient follows contrib's `_apply_sparse`: `m` is updated densely (it
    decays on the untouched rows too, an O(table) step), the output is row-sparse (the
    variable changes on the touched rows only), and the factor is computed as contrib
    does there, `pow(e, log(b) d_t sign(g) sign(m))` with `e` rounded to the leaf dtype
    (not `exp`: a relative difference of about :math:`3\cdot10^{-8}\,|\log(b) d_t|` in
    float32).

    Args:
      base: the base :math:`b > 0` (number, scalar array or schedule).
      beta: the decay of the moving average `m`, in [0, 1].
      sign_decay: None (1.0), a finite number or scalar array, or a schedule
        `count -> value` multiplying the sign agreement.

    Returns:
      A `GradientTransformation` with state `ScaleByPowerSignState(count, m)`.

    Raises:
      TypeError: if a hyperparameter is not a number, scalar array or schedule.
      ValueError: if `base` is not positive and finite, `beta` is outside [0, 1] or
        `sign_decay` is not finite.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import scale_by_powersign
        >>> tx = scale_by_powersign(base=2.0, beta=0.5)
        >>> state = tx.init(jnp.zeros(2))
        >>> u, state = tx.update(jnp.array([1.0, -1.0]), state)  # m agrees with g: times 2
        >>> u, state = tx.update(jnp.array([-3.0, 0.5]), state)  # m = [-1.25, 0]: times 2, then 1
        >>> u
        Array([-6. ,  0.5], dtype=float32)

    References:
      Bello, Zoph, Vasudevan, Le, *Neural optimizer search with reinforcement learning*,
      ICML 2017 (PowerSign, section 5).
    """
    fn = "scale_by_powersign"
    _checks.check_finite(fn, "base", base)
    _checks.check_positive(fn, "base", base)
    _checks.check_in_range(fn, "beta", beta, 0.0, 1.0)
    _check_sign_decay(fn, sign_decay)
    known = _logbase(base)

    def resolve_extra(count):
        if known is not None:
            return known  # a Python float: `like` casts it to each leaf's dtype exactly
        return jnp.log(_tree.scalar(_tree.resolve(base, count)))

    def multiplier(sign_gm, decay, logbase, like, row_sparse):
        exponent = (_tree.like(logbase, like) * _tree.like(decay, like)) * sign_gm
        if row_sparse:  # contrib: math_ops.pow(cast(math.e), logbase * sign_decay * sign_gm)
            return jnp.power(_tree.like(math.e, like), exponent)
        return jnp.exp(exponent)  # the kernel: (logbase * sign_decay * sign_gm).exp()

    return _sign_transform(fn, ScaleByPowerSignState, beta, sign_decay, resolve_extra, multiplier)


class ScaleByNeuralOptimizer1State(NamedTuple):
    """State of `scale_by_neural_optimizer1`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # RETURNN slot "m": running average of the gradient (starts at 0)


@_base.api
@_base.real_only("it compares the signs of the gradient and its moving average")
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
            v = _tree.values_of(g)
            beta, df = _tree.like(b1_, v), _tree.like(df_, v)
            m = sparse.decay_and_add(g, m, _tree.like(beta, m), v * (1 - beta))
            agree = jnp.sign(_tree.rows_of(g, m)) == jnp.sign(v)
            return _tree.with_values(g, v * jnp.where(agree, jnp.ones_like(v), jnp.ones_like(v) * df)), m

        out, m = _tree.split_map(fn, leaf, 2, updates, state.m, names=("updates", "state.m"))
        return out, ScaleByNeuralOptimizer1State(_tree.increment(state.count), m)

    return _protocol.ElementWise(init_fn, update_fn)
