"""AddSign (tf.contrib's `AddSignOptimizer`): with the sign-decayed moment AddSign and PowerSign share."""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax.numpy as jnp

from gradtx import sparse
from gradtx._algorithms.neural_optimizer1 import _SIGNS
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByAddSignState(NamedTuple):
    """State of `scale_by_addsign`."""

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


@_registry.transform()
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


@_registry.optimizer("AddSign")
def addsign(
    learning_rate: _protocol.ScalarOrSchedule = 0.1,
    alpha: _protocol.ScalarOrSchedule = 1.0,
    beta: _protocol.ScalarOrSchedule = 0.9,
    sign_decay: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""AddSign: `tf.contrib.opt.AddSignOptimizer` (`ApplyAddSign`), TF's defaults.

    `m = beta * m + (1 - beta) * g`, then `var -= lr * (alpha + d * sign(g) * sign(m)) * g`
    with the new `m` and `d` the sign decay (1 when None; TF's `sign_decay_fn`, e.g.
    `gradtx.schedules.linear_sign_decay(decay_steps)`, which sees `count = t-1`, TF's
    `global_step`). This is
    `chain(scale_by_addsign(alpha, beta, sign_decay), scale_by_learning_rate(learning_rate))`.
    Row-sparse gradients follow contrib: `m` decays on every row (O(table)), the variable
    moves on the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      alpha: the constant part of the multiplier, finite.
      beta: the decay of the moving average `m`, in [0, 1].
      sign_decay: None (1.0), a number, or a schedule `count -> value` (TF's `sign_decay_fn`).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "m")`.

    Raises:
      ValueError: for `beta` outside [0, 1], a non-finite `alpha` or `sign_decay`, a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.addsign(learning_rate=0.1)
        >>> [round(float(u), 6) for u in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.4, 0.1]
    """
    return chain(scale_by_addsign(alpha, beta, sign_decay), scale_by_learning_rate(learning_rate))


__all__ = ["ScaleByAddSignState", "addsign", "scale_by_addsign"]
