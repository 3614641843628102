"""Schedule-free RAdam (pytorch-optimizer's `ScheduleFreeRAdam`): rectified steps on `z`."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY, _dtype
from gradtx._algorithms.radam import _rho
from gradtx._algorithms.schedule_free import (
    ScaleByScheduleFreeState,
    _schedule_free_leaf,
    averaging_scalars,
)
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.chain import chain
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._weight_decay import add_decayed_weights


class ScheduleFreeRAdamState(NamedTuple):
    """State of schedule-free RAdam's normalisation (the first link of `schedule_free_radam`)."""

    count: _protocol.Count  # int32: completed updates
    exp_avg_sq: _protocol.Updates  # the second moment (starts at 0)


def _rectified(t: Any, b2: float, dtype: Any) -> tuple[Any, Any]:
    r"""`(rho_t > 4, r_t)`: RAdam's :math:`\rho_t` past 4, and the rectification without its
    :math:`\sqrt{1-\beta_2^t}` (which the normalisation's bias correction cancels), 0 where
    :math:`\rho_t \le 4`."""
    rho_inf = 2 / (1 - b2) - 1
    if rho_inf <= 4:  # rho_t < rho_inf: never rectified
        return jnp.zeros((), bool), jnp.zeros((), dtype)
    rho = _rho(t, b2, dtype)
    c = jnp.maximum(rho, 4.0)
    rect = jnp.sqrt((c - 4) * (c - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * c))
    return rho > 4, rect


def _normalised_leaf(g, exp_avg_sq, h):
    """`g / (sqrt(v / (1 - b2^t)) + eps)` once RAdam's rho_t is past 4, the raw gradient before."""
    dtype = _dtype(g)
    exp_avg_sq = _formulas.moment_blend(exp_avg_sq, g * g, h.b2)
    past, _ = _rectified(h.t, h.b2, dtype)
    denom = jnp.sqrt(exp_avg_sq) / jnp.sqrt(_formulas.torch_debias(h.b2, h.t, dtype)) + h.eps
    return jnp.where(past, g / denom, g), exp_avg_sq


def _radam_scalars(h, state, extra, *, b2, silent):
    """The step's rate (rectified; 0, or 1 when not `silent`, while rho_t <= 4) and the average's weight
    :math:`t^r \\gamma_{\\max}^p`: the scalars of `_schedule_free_leaf`, as `_schedule_free_scalars` gives
    them."""
    del extra
    dt = state.max_lr.dtype
    base = jnp.asarray(h.learning_rate, dt)
    past, rect = _rectified(h.t, b2, dt)
    lr = jnp.where(past, base * rect, jnp.where(base > 0, 0.0 if silent else 1.0, 0.0))
    return averaging_scalars(h, state, lr, t_power=h.r)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.ScheduleFreeRAdam",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "r": "r",
            "weight_lr_power": "weight_lr_power",
            "silent_sgd_phase": "silent_sgd_phase",
            "eps": "eps",
        },
        defaults={"lr": 2.5e-3, "betas": (0.9, 0.999)},
        fixed={"maximize": False},
    )
)
def schedule_free_radam(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: float = 0.999,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    r: _protocol.ScalarOrSchedule = 0.0,
    weight_lr_power: _protocol.ScalarOrSchedule = 2.0,
    silent_sgd_phase: bool = True,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""Schedule-free RAdam: the gradient normalised by RAdam's rectified second moment steps `z`; the params
    interpolate `z` and its average.

    With :math:`\rho_t` RAdam's length of the moving average and :math:`r_t` its rectification
    (`radam`), the step's rate is :math:`\gamma_t = \eta\, r_t / \sqrt{1-\beta_2^t}` once
    :math:`\rho_t > 4`, and before that 0 (`silent_sgd_phase`, the default) or 1:

    .. math::
        v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \qquad
        d_t = \frac{g_t}{\sqrt{v_t / (1-\beta_2^t)} + \epsilon} + \lambda y_t
            \quad (d_t = g_t + \lambda y_t \text{ while } \rho_t \le 4), \\
        c_{t+1} = \frac{t^r \gamma_{\max,t}^p}{\sum_{i \le t} i^r \gamma_{\max,i}^p}, \qquad
        y_{t+1} = (1 - c_{t+1})\, y_t + c_{t+1} z_t + \gamma_t (\beta_1 (1 - c_{t+1}) - 1)\, d_t, \qquad
        z_{t+1} = z_t - \gamma_t d_t

    which is `scale_by_schedule_free`'s interpolation (its `_schedule_free_leaf` and state, so
    `schedule_free_eval_params` gives the average :math:`x` to evaluate), with the rate and the
    averaging weight above. The params are :math:`y`, the training iterate, as the reference's are in
    train mode. These are the numbers of pytorch-optimizer's `ScheduleFreeRAdam`
    (`gradtx.get("ScheduleFreeRAdam", lr=...)` takes its arguments and defaults): the paper's
    schedule-free AdamW with RAdam's rectification in place of a warmup. Its details are the
    reference's: the weight decay is coupled (added to the normalised gradient, at :math:`y`), and a
    non-silent first phase takes plain gradient steps at rate 1 whatever the learning rate. A row-sparse
    gradient is densified.

    Args:
      learning_rate: :math:`\eta`, >= 0 (number, scalar array or schedule).
      b1: :math:`\beta_1`, the interpolation between `z` and its average, in (0, 1).
      b2: :math:`\beta_2`, decay of the second moment, a number in [0, 1).
      weight_decay: :math:`\lambda`, >= 0 (coupled).
      r: the power of the step in the averaging weights, >= 0.
      weight_lr_power: :math:`p`, the power of the largest rate so far in the averaging weights, >= 0.
      silent_sgd_phase: while :math:`\rho_t \le 4`, take no step (True) or gradient steps at rate 1.
      eps: added to the root of the corrected second moment, >= 0.

    Returns:
      An `ElementWise` chain with state `(ScheduleFreeRAdamState(count, exp_avg_sq), AddDecayedWeightsState,
      ScaleByScheduleFreeState(count, z, b1, weight_sum, max_lr))`.

    Raises:
      ValueError: for a negative rate, decay, power or `eps`, `b1` outside (0, 1), `b2` outside [0, 1).
      TypeError: for a schedule as `b2` or a non-bool `silent_sgd_phase`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.schedule_free_radam(0.1)
        >>> params = {"w": jnp.array([1.0, -1.0])}
        >>> state = tx.init(params)
        >>> for _ in range(10):
        ...     u, state = tx.update(params, state, params)  # the gradient of |w|^2 / 2
        ...     params = gradtx.apply_updates(params, u)
        >>> x = gradtx.schedule_free_eval_params(state, params)
        >>> bool(jnp.all(jnp.abs(x["w"]) < 1.0)), bool(jnp.all(jnp.abs(params["w"]) < 1.0))
        (True, True)

    References:
      Defazio, Yang, Mehta, Mishchenko, Khaled, Cutkosky, *The road less scheduled*, NeurIPS 2024
      (arXiv:2405.15682); Liu et al., *On the variance of the adaptive learning rate and beyond*, ICLR
      2020 (RAdam); pytorch-optimizer's `ScheduleFreeRAdam` (the reference of the tests).
    """
    fn = "schedule_free_radam"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, low_open=True, high_open=True)
    _checks.check_number(fn, "b2", b2)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_nonnegative(fn, "r", r)
    _checks.check_nonnegative(fn, "weight_lr_power", weight_lr_power)
    _checks.check_bool(fn, "silent_sgd_phase", silent_sgd_phase)
    _checks.check_nonnegative(fn, "eps", eps)
    b2 = float(b2)

    normalise = update_rule(
        fn, ScheduleFreeRAdamState, _normalised_leaf, hyper={"b2": b2, "eps": eps},
        slots={"exp_avg_sq": SQUARES}, real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip
    interpolate = update_rule(
        fn,
        ScaleByScheduleFreeState,
        functools.partial(_schedule_free_leaf, steps_given=False),
        hyper={"learning_rate": learning_rate, "b1": b1, "r": r, "weight_lr_power": weight_lr_power},
        slots={"z": jnp.copy},  # z_1 = the initial params (its own buffer)
        scalars={"b1": lambda h: h.b1, "weight_sum": lambda h: 0.0, "max_lr": lambda h: 0.0},
        prepare=functools.partial(_radam_scalars, b2=b2, silent=silent_sgd_phase),
        reads_params=True,
        real_only=_REAL_ONLY,
    )
    return chain(normalise, add_decayed_weights(weight_decay), interpolate)


__all__ = ["ScheduleFreeRAdamState", "schedule_free_radam"]
