"""StableSPAM (pytorch-optimizer's): Adam on gradients clipped against a running maximum and rescaled per
leaf, with periodic momentum resets: `scale_by_stable_spam`, `stable_spam`. SPAM is in `spam.py`."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY, _dtype
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core import sliced as _sliced
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._weight_decay import torch_weight_decay


class StableSpamState(NamedTuple):
    """State of `scale_by_stable_spam`."""

    count: _protocol.Count  # int32: completed updates (the reference's `total_step`)
    exp_avg: (
        _protocol.Updates
    )  # first moment of the rescaled gradients (zeroed every `update_proj_gap` steps)
    exp_avg_sq: _protocol.Updates  # second moment (likewise)
    m_norm_t: _protocol.Updates  # per leaf, a scalar: moving average of the gradient's norm
    v_norm_t: _protocol.Updates  # per leaf, a scalar: moving average of its square
    m_max_t: _protocol.Updates  # per leaf, a scalar: moving average of the largest |g|


# the norms are one scalar per leaf: only the moments are compared with the params' shapes
setattr(StableSpamState, "slots_shaped_like_params", ("exp_avg", "exp_avg_sq"))  # noqa: B010  (not a field)


def _stable_spam_leaf(g, exp_avg, exp_avg_sq, m_norm, v_norm, m_max, h, *, gap, t_max, eta_min):
    """One leaf of StableSPAM: the direction `m / (bc1 (sqrt(v / bc2) + eps))`, 0 for a zero gradient."""
    dtype = _dtype(g)
    t = h.t.astype(dtype)
    if t_max is None:
        scale = 1.0
    else:  # pytorch-optimizer's `CosineDecay(1, t_max, eta_min)`, first read at step 1
        arc = math.pi / (t_max + 1)
        cos = (1 + jnp.cos(arc * (t + 1))) / (1 + math.cos(arc))
        scale = jnp.where(h.t < t_max, eta_min + (1 - eta_min) * cos, eta_min)
    top = _sliced.total(jnp.max(jnp.abs(g), initial=0), "max")  # an empty leaf: 0 (and no step)
    m_max = _formulas.moment_increment(m_max, top, h.theta)
    hat = m_max / _formulas.torch_debias(h.theta, h.t, dtype)
    g = jnp.where(jnp.abs(g) > hat, g / top * hat, g)
    norm = _formulas.leaf_norm(g)  # the whole leaf's, as `top` is, on ZeRO's slices too
    active = norm != 0  # a NaN norm is active: NaN reaches the params, as in the reference
    decay1 = h.gamma1 * scale
    new_m_norm = _formulas.moment_increment(m_norm, norm, decay1)
    new_v_norm = _formulas.moment_increment(v_norm, norm * norm, h.gamma2)
    m_hat = new_m_norm / _formulas.torch_debias(decay1, h.t, dtype)
    c = m_hat / (jnp.sqrt(new_v_norm / _formulas.torch_debias(h.gamma2, h.t, dtype)) + h.eps)
    g = g / jnp.where(active, norm, 1) * c
    restart = h.t % gap == 0  # the moments and the bias corrections restart
    m = jnp.where(restart, 0, exp_avg)
    v = jnp.where(restart, 0, exp_avg_sq)
    s = jnp.where(h.t < gap, h.t, h.t % gap + 1)
    beta1 = h.b1 * scale
    new_m = _formulas.moment_increment(m, g, beta1)
    new_v = _formulas.moment_blend(v, g * g, h.b2)
    bc1 = _formulas.torch_debias(beta1, s, dtype)
    u = new_m / (jnp.sqrt(new_v) / jnp.sqrt(_formulas.torch_debias(h.b2, s, dtype)) + h.eps) / bc1
    return (
        jnp.where(active, u, 0),
        jnp.where(active, new_m, m),
        jnp.where(active, new_v, v),
        jnp.where(active, new_m_norm, m_norm),
        jnp.where(active, new_v_norm, v_norm),
        m_max,
    )


def _scalar_slot(p):
    """A per-leaf scalar on the parameter's devices."""
    return _placement.reduced(p, ())


@_registry.transform()
def scale_by_stable_spam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    gamma1: _protocol.ScalarOrSchedule = 0.7,
    gamma2: _protocol.ScalarOrSchedule = 0.9,
    theta: _protocol.ScalarOrSchedule = 0.999,
    t_max: int | None = None,
    eta_min: float = 0.5,
    update_proj_gap: int = 1000,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""StableSPAM's direction: Adam on gradients clipped against a running maximum and rescaled per leaf.

    For each leaf, at step :math:`t`, with :math:`s_t` the cosine multiplier of the betas (1 without
    `t_max`) and :math:`k` the step counted from the last reset (every :math:`T` = `update_proj_gap`
    steps, when :math:`m` and :math:`v` restart at 0):

    .. math::
        M_t = \theta M_{t-1} + (1-\theta) \max|g|, \qquad
        \tilde g = g \frac{M_t / (1-\theta^t)}{\max|g|} \text{ where } |g| > \frac{M_t}{1-\theta^t}, \\
        n_t = \gamma_1 s_t\, n_{t-1} + (1-\gamma_1 s_t) \lVert\tilde g\rVert, \qquad
        q_t = \gamma_2 q_{t-1} + (1-\gamma_2) \lVert\tilde g\rVert^2, \qquad
        \hat g = \frac{\tilde g}{\lVert\tilde g\rVert}
            \frac{n_t / (1 - (\gamma_1 s_t)^t)}{\sqrt{q_t / (1-\gamma_2^t)} + \epsilon}, \\
        m_t = \beta_1 s_t m_{t-1} + (1 - \beta_1 s_t) \hat g, \qquad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) \hat g^2, \qquad
        u_t = \frac{m_t}{(1 - (\beta_1 s_t)^k) (\sqrt{v_t / (1-\beta_2^k)} + \epsilon)}

    with :math:`s_t = \eta_{\min} + (1-\eta_{\min}) \frac{1 + \cos(\pi (t+1)/(t_{\max}+1))}{1 +
    \cos(\pi/(t_{\max}+1))}` for :math:`t < t_{\max}`, then :math:`\eta_{\min}`: pytorch-optimizer's
    `CosineDecay`, as its `StableSPAM` reads it from step 1 (so :math:`s_1 = 1`). A leaf whose clipped
    gradient is zero keeps its moments and norms and gets no step. `gamma1=-1` takes :math:`\gamma_1 =
    \beta_1`. These are the numbers of pytorch-optimizer's `StableSPAM`; see `stable_spam`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      gamma1: decay of the norm's average, in [0, 1), or -1 for `b1`.
      gamma2: decay of the squared norm's average, in [0, 1).
      theta: decay of the running maximum of :math:`|g|`, in [0, 1).
      t_max: the steps of the betas' cosine decay (an int >= 1), or None for none.
      eta_min: the betas' multiplier after the decay, in [0, 1].
      update_proj_gap: :math:`T`, the period of the momentum resets (an int >= 1).
      eps: added to the roots, >= 0.

    Returns:
      A `SliceWise` transform with state `StableSpamState(count, exp_avg, exp_avg_sq, m_norm_t, v_norm_t,
      m_max_t)` (the last three one scalar per leaf).

    Raises:
      ValueError: for a decay outside its range, a negative `eps`, a step count out of range.
      TypeError: for a non-int step count.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_stable_spam()
        >>> u, state = tx.update(jnp.array([0.5, -2.0]), tx.init(jnp.zeros(2)))
        >>> u.round(4)  # sign(g) at first
        Array([ 1., -1.], dtype=float32)

    References:
      Huang, Zhu, Jin, Liu, Wang, Liu, *Stable-SPAM: how to train in 4-bit more stably than 16-bit
      Adam* (2025, arXiv:2502.17055); pytorch-optimizer's `StableSPAM`.
    """
    fn = "scale_by_stable_spam"
    _check_stable_spam(fn, b1, b2, gamma1, gamma2, theta, t_max, eta_min, update_proj_gap, eps)
    return update_rule(
        fn, StableSpamState,
        functools.partial(_stable_spam_leaf, gap=int(update_proj_gap),
                          t_max=None if t_max is None else int(t_max), eta_min=float(eta_min)),
        hyper={"b1": b1, "b2": b2, "gamma1": b1 if _is_minus_one(gamma1) else gamma1, "gamma2": gamma2,
               "theta": theta, "eps": eps},
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES, "m_norm_t": _scalar_slot, "v_norm_t": _scalar_slot,
               "m_max_t": _scalar_slot},
        kind=_protocol.SliceWise, real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


def _is_minus_one(gamma1: Any) -> bool:
    """`gamma1 = -1`: the reference's "take `b1`"."""
    return _scalars.is_python_number(gamma1) and gamma1 == -1


def _check_stable_spam(fn, b1, b2, gamma1, gamma2, theta, t_max, eta_min, update_proj_gap, eps):
    for name, value in (("b1", b1), ("b2", b2), ("gamma2", gamma2), ("theta", theta)):
        _checks.check_in_range(fn, name, value, 0.0, 1.0, high_open=True)
    if not _is_minus_one(gamma1):
        _checks.check_in_range(fn, "gamma1", gamma1, 0.0, 1.0, high_open=True)
    if t_max is not None:
        _checks.check_int(fn, "t_max", t_max, minimum=1)
    _checks.check_number(fn, "eta_min", eta_min)
    _checks.check_in_range(fn, "eta_min", eta_min, 0.0, 1.0)
    _checks.check_int(fn, "update_proj_gap", update_proj_gap, minimum=1)
    _checks.check_nonnegative(fn, "eps", eps)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.StableSPAM",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "gamma1": "gamma1",
            "gamma2": "gamma2",
            "theta": "theta",
            "t_max": "t_max",
            "eta_min": "eta_min",
            "weight_decay": "weight_decay",
            "update_proj_gap": "update_proj_gap",
            "eps": "eps",
        },
        defaults={"lr": 1e-3, "betas": (0.9, 0.999)},
        fixed={"maximize": False},
    )
)
def stable_spam(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    gamma1: _protocol.ScalarOrSchedule = 0.7,
    gamma2: _protocol.ScalarOrSchedule = 0.9,
    theta: _protocol.ScalarOrSchedule = 0.999,
    t_max: int | None = None,
    eta_min: float = 0.5,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    update_proj_gap: int = 1000,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""StableSPAM: Adam on gradients clipped against their running maximum and rescaled to a running norm.

    :math:`w_t = w_{t-1} (1 - \eta\lambda) - \eta u_t`, with :math:`u_t` the direction of
    `scale_by_stable_spam` (`torch_weight_decay`): the numbers of pytorch-optimizer's `StableSPAM`
    (`gradtx.get("StableSPAM", lr=...)` takes its arguments and defaults). Its details are the reference's
    where the paper's text may differ: `t_max` decays :math:`\beta_1` and :math:`\gamma_1`
    (not the rate) by a cosine read from step 1; the momentum resets every `update_proj_gap` steps with
    the bias corrections restarted (at 1 on the reset step); the decay is decoupled. A row-sparse gradient
    is densified.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      gamma1: decay of the norm's average, in [0, 1), or -1 for `b1`.
      gamma2: decay of the squared norm's average, in [0, 1).
      theta: decay of the running maximum of :math:`|g|`, in [0, 1).
      t_max: the steps of the betas' cosine decay (an int >= 1), or None for none.
      eta_min: the betas' multiplier after the decay, in [0, 1].
      weight_decay: :math:`\lambda`, >= 0 (decoupled, scaled by the rate).
      update_proj_gap: the period of the momentum resets (an int >= 1).
      eps: added to the roots, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      A `SliceWise` chain; its slots are `exp_avg`, `exp_avg_sq` and per-leaf `m_norm_t`, `v_norm_t`,
      `m_max_t`.

    Raises:
      ValueError: for a decay outside its range, a negative rate, weight decay or `eps`.
      TypeError: for a non-int step count.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.stable_spam(0.1)
        >>> params = jnp.zeros(2)
        >>> u = tx.update(jnp.array([0.5, -2.0]), tx.init(params), params)[0]
        >>> (u / 0.1).round(3)  # -lr sign(g) at first
        Array([-1.,  1.], dtype=float32)

    References:
      Huang, Zhu, Jin, Liu, Wang, Liu, *Stable-SPAM: how to train in 4-bit more stably than 16-bit
      Adam* (2025, arXiv:2502.17055); pytorch-optimizer's `StableSPAM` (the reference of the tests).
    """
    fn = "stable_spam"
    _check_stable_spam(fn, b1, b2, gamma1, gamma2, theta, t_max, eta_min, update_proj_gap, eps)
    return torch_weight_decay(
        scale_by_stable_spam(b1, b2, gamma1, gamma2, theta, t_max, eta_min, update_proj_gap, eps),
        learning_rate,
        weight_decay,
        mask=mask,
    )


__all__ = ["StableSpamState", "scale_by_stable_spam", "stable_spam"]
