"""PowerSign (tf.contrib's `PowerSignOptimizer`)."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._algorithms.addsign import _check_sign_decay, _sign_decay, _sign_rule
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByPowerSignState(NamedTuple):
    """State of `scale_by_powersign`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": moving average of the gradients (starts at 0)


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


@_registry.transform()
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


@_registry.optimizer("PowerSign")
def powersign(
    learning_rate: _protocol.ScalarOrSchedule = 0.1,
    base: _protocol.ScalarOrSchedule = math.e,
    beta: _protocol.ScalarOrSchedule = 0.9,
    sign_decay: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""PowerSign: `tf.contrib.opt.PowerSignOptimizer` (`ApplyPowerSign`), TF's defaults.

    `m = beta * m + (1 - beta) * g`, then
    `var -= lr * exp(log(base) * d * sign(g) * sign(m)) * g` with the new `m` and `d` the
    sign decay (1 when None; TF's `sign_decay_fn`, e.g.
    `gradtx.schedules.cosine_sign_decay(decay_steps)`, which sees `count = t-1`). This is
    `chain(scale_by_powersign(base, beta, sign_decay), scale_by_learning_rate(learning_rate))`.
    Row-sparse gradients follow contrib: `m` decays on every row (O(table)), the variable
    moves on the touched rows only, with contrib's `pow(e, .)` in place of `exp`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      base: the base, > 0 (`log(base)` is taken in double precision, as contrib does).
      beta: the decay of the moving average `m`, in [0, 1].
      sign_decay: None (1.0), a number, or a schedule `count -> value` (TF's `sign_decay_fn`).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "m")`.

    Raises:
      ValueError: for a `base` not positive and finite, `beta` outside [0, 1], a non-finite
        `sign_decay`, a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.powersign(learning_rate=0.1)
        >>> [round(float(u), 5) for u in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.54366, 0.13591]
    """
    return chain(scale_by_powersign(base, beta, sign_decay), scale_by_learning_rate(learning_rate))


__all__ = ["ScaleByPowerSignState", "powersign", "scale_by_powersign"]
