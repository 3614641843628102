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

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import walk as _walk
from gradtx._core.rule import update_rule


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


def _sign_leaf(g, m, h, *, factor: Callable[..., Any]):
    """ApplyAddSign / ApplyPowerSign: `m = m beta + g (1 - beta)`, the step `factor(sign(g) sign(m)) * g`."""
    m = _formulas.moment_blend(m, g, h.beta)
    sign_gm = jnp.sign(g) * jnp.sign(m)  # the NEW m; sign(0) = 0
    return factor(sign_gm, h, row_sparse=False) * g, m


def _sign_rows(g, m, h, *, factor: Callable[..., Any]):
    """contrib's `_apply_sparse`: `m = m*beta + densify(g)*(1-beta)` on ALL rows (untouched rows decay),
    the variable moves on the touched rows only."""
    g = g.deduplicated()
    m = sparse.decay_and_add(g, m, h.beta, g.values * (1 - h.beta))
    sign_gm = jnp.sign(g.gather(m)) * jnp.sign(g.values)
    rows = factor(sign_gm, h, row_sparse=True) * g.values
    return g.with_values(g.zero_padding(rows)), m


_SIGNS = "it compares the signs of the gradient and its moving average"


def _sign_rule(fn, state_cls, factor, hyper, prepare=None):
    """A sign rule from its gradient's factor `factor(sign_gm, h, row_sparse)` and its hyperparameters."""
    return update_rule(
        fn,
        state_cls,
        functools.partial(_sign_leaf, factor=factor),
        hyper=hyper,
        slots={"m": 0.0},
        prepare=prepare,
        sparse=functools.partial(_sign_rows, factor=factor),
        tf_scalars=True,
        real_only=_SIGNS,
    )


def _sign_decay(sign_decay: Any) -> Any:
    """The sign decay hyperparameter: 1.0 when None."""
    return 1.0 if sign_decay is None else sign_decay


def _addsign_factor(sign_gm, h, row_sparse):
    """`alpha + decay * sign_gm`: the kernel's and contrib's sparse path agree."""
    del row_sparse
    return h.alpha + h.sign_decay * sign_gm


@_factory.api
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

    hyper = {"alpha": alpha, "beta": beta, "sign_decay": _sign_decay(sign_decay)}
    return _sign_rule(fn, ScaleByAddSignState, _addsign_factor, hyper)


def _logbase(base: Any) -> Any:
    """`log(base)` for a known base as contrib computes it (`math.log`, in double); None when not known."""
    if _checks.is_schedule(base) or isinstance(base, jax.core.Tracer):
        return None
    return math.log(float(base))


def _logbase_of(known, h, state, extra_args):
    """`log(base)`: contrib's `math.log` in double for a known base (kept a Python float, so it is rounded
    once, to each leaf's dtype), else the log of the step's base in the variables' dtype."""
    del state, extra_args
    return {"logbase": known if known is not None else jnp.log(h.base)}


def _powersign_factor(sign_gm, h, row_sparse):
    """`exp(log(b) d sign_gm)`, the scalar `log(b) d` formed first."""
    exponent = (h.logbase * h.sign_decay) * sign_gm
    if row_sparse:  # contrib: math_ops.pow(cast(math.e), logbase * sign_decay * sign_gm)
        return jnp.power(jnp.asarray(math.e, exponent.dtype), exponent)
    return jnp.exp(exponent)  # the kernel: (logbase * sign_decay * sign_gm).exp()


@_factory.api
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

    hyper = {"beta": beta, "sign_decay": _sign_decay(sign_decay)}
    if known is None:
        hyper["base"] = base
    prepare = functools.partial(_logbase_of, known)
    return _sign_rule(fn, ScaleByPowerSignState, _powersign_factor, hyper, prepare)


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


@_factory.api
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
