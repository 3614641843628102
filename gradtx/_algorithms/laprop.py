"""LaProp (Ziyin et al. 2020): the momentum of RMSProp-normalized gradients, pytorch-optimizer's `LaProp`."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY
from gradtx._algorithms.cautious import cautious_mask
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.rule import SQUARES, update_rule

EXP_AVG_SQ_EPS = 1e-15
"""Added to the second moment under the root (pytorch-optimizer's `apply_ams_bound`)."""


class LaPropState(NamedTuple):
    """State of `laprop` (pytorch-optimizer's names)."""

    count: _protocol.Count  # int32: completed updates (the reference's `step`)
    exp_avg: _protocol.Updates  # the momentum of the normalized gradients, rate included (starts at 0)
    exp_avg_sq: _protocol.Updates  # the second moment (starts at 0)
    exp_mean_avg_beta2: _protocol.Updates  # the gradients' mean, with decay b2 (centered), else None
    max_exp_avg_sq: _protocol.Updates  # running maximum of the second moment (ams_bound), else None
    exp_avg_lr_1: Any  # the moving average of the learning rate, with decay b1 (starts at 0)


def _prepare(h, state, extra_args, *, decouple, fixed):
    """The step's scalars: the rates' average, the step size `lr / that`, `sqrt(1 - b2^t)`, the decay."""
    del state, extra_args
    lr = h.learning_rate
    ema = h.exp_avg_lr_1 * h.b1 + (1 - h.b1) * lr
    step = jnp.where(jnp.asarray(lr) != 0, lr / jnp.where(jnp.asarray(lr) != 0, ema, 1), 1.0)
    decay = 0.0 if not decouple else h.weight_decay if fixed else lr * h.weight_decay
    dtype = jnp.result_type(ema)
    return {
        "exp_avg_lr_1": ema,
        "step_size": step,
        "bc2_sq": jnp.sqrt(_formulas.torch_debias(h.b2, h.t, dtype)),
        "decay": decay,
    }


def _laprop_leaf(g, m, v, mean, vmax, w, h, *, path, centered, cautious):
    """One LaProp step of a leaf, as the step added to the params (the rate inside the momentum)."""
    dtype, wide = g.dtype, _scalars.at_least_float32(g.dtype)
    g, w = g.astype(wide), w.astype(wide)
    v = _formulas.moment_blend(v, g * g, h.b2)
    second = v
    if centered:
        mean = _formulas.moment_increment(mean, g, h.b2)  # torch's lerp
        second = jnp.where(h.t > h.steps_before_using_centered, v - mean * mean, v)
    if vmax is not None:
        vmax = jnp.maximum(vmax, second)
        second = vmax
    den = (jnp.sqrt(second + EXP_AVG_SQ_EPS) + h.eps) / h.bc2_sq
    m = m * h.b1 + ((1 - h.b1) * h.learning_rate) * (g / den)
    u = -h.step_size * (cautious_mask(m, g, path) if cautious else m)
    return (u - h.decay * (w + u)).astype(dtype), m, v, mean, vmax


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.LaProp",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "centered": "centered",
            "steps_before_using_centered": "steps_before_using_centered",
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "fixed_decay": "fixed_decay",
            "ams_bound": "ams_bound",
            "eps": "eps",
            "cautious": "cautious",
        },
        defaults={"lr": 4e-4, "betas": (0.9, 0.999)},
        fixed={"maximize": False},
    )
)
def laprop(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-15,
    *,
    centered: bool = False,
    steps_before_using_centered: int = 10,
    weight_decouple: bool = True,
    fixed_decay: bool = False,
    ams_bound: bool = False,
    cautious: bool = False,
) -> _protocol.GradientTransformation:
    r"""LaProp: a momentum of the gradients normalized by RMSProp's root, the rate inside the momentum.

    .. math::
        v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \quad
        m_t = \beta_1 m_{t-1} + (1-\beta_1)\, \eta_t \frac{g_t}{(\sqrt{v_t + 10^{-15}} + \epsilon)
        / \sqrt{1-\beta_2^t}}, \\
        \bar\eta_t = \beta_1 \bar\eta_{t-1} + (1-\beta_1) \eta_t, \quad
        w_t = \Big(w_{t-1} - \frac{\eta_t}{\bar\eta_t} m_t\Big)(1 - \eta_t\lambda)

    Unlike Adam, the momentum averages gradients already divided by the root of the second
    moment (so momentum and adaptivity decouple), and the learning rate enters the momentum:
    the bias correction is the moving average :math:`\bar\eta_t` of the rates (:math:`1 -
    \beta_1^t` times a constant rate). `centered` subtracts the squared mean of the gradients
    from :math:`v_t` after `steps_before_using_centered` steps; `ams_bound` divides by the running
    maximum of that second moment; `cautious` masks the momentum's disagreeing signs
    (`cautious_mask`). These are the numbers and defaults of pytorch-optimizer's `LaProp`
    (`gradtx.get("LaProp", lr=..., betas=...)` takes its arguments), whose details beyond the
    paper's pseudo-code gradtx follows: :math:`10^{-15}` is added under the root, and the
    weight decay comes after the step, on the new weights: decoupled it multiplies them by
    :math:`1 - \eta_t\lambda` (:math:`1 - \lambda` with `fixed_decay`), and `weight_decouple=False`
    adds :math:`\lambda w` to a gradient that is no longer read, so it decays nothing (the
    reference's own behaviour). The step returned is the one added to the params (no separate
    learning-rate scaling). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule), inside the momentum.
      b1: decay of the momentum and of the rates' average, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      weight_decay: :math:`\lambda`, >= 0.
      eps: added to the root of the second moment, >= 0.
      centered: subtract the squared moving mean of the gradients from the second moment.
      steps_before_using_centered: with `centered`, the steps before the centering applies, >= 0.
      weight_decouple: decay the weights after the step (True), or through the (unread) gradient.
      fixed_decay: with `weight_decouple`, decay by :math:`\lambda` instead of :math:`\eta\lambda`.
      ams_bound: divide by the running maximum of the second moment.
      cautious: zero the momentum's elements that disagree in sign with the gradient (rescaled).

    Returns:
      An `ElementWise` transform (`SliceWise` with `cautious`: the mask's count is each whole leaf's,
      on ZeRO's slices too) with state `LaPropState`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, weight decay, rate or
        `steps_before_using_centered`.
      TypeError: for a non-bool option or a non-int `steps_before_using_centered`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.laprop(0.1)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0].round(6)  # -lr sign(g) at step 1
        Array([-0.1,  0.1], dtype=float32)

    References:
      Ziyin, Wang, Ueda, *LaProp: separating momentum and adaptivity in Adam* (2020),
      arXiv:2002.04839; pytorch-optimizer's `LaProp` (the reference of the tests).
    """
    fn = "laprop"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_nonnegative(fn, "eps", eps)
    for name, flag in (
        ("centered", centered),
        ("weight_decouple", weight_decouple),
        ("fixed_decay", fixed_decay),
        ("ams_bound", ams_bound),
        ("cautious", cautious),
    ):
        _checks.check_bool(fn, name, flag)
    _checks.check_int(fn, "steps_before_using_centered", steps_before_using_centered, minimum=0)
    return update_rule(
        fn,
        LaPropState,
        functools.partial(_laprop_leaf, centered=centered, cautious=cautious),
        hyper={
            "learning_rate": learning_rate,
            "b1": b1,
            "b2": b2,
            "weight_decay": weight_decay,
            "eps": eps,
            "steps_before_using_centered": steps_before_using_centered,
        },
        slots={
            "exp_avg": 0.0,
            "exp_avg_sq": SQUARES,
            "exp_mean_avg_beta2": 0.0 if centered else None,
            "max_exp_avg_sq": SQUARES if ams_bound else None,
        },
        scalars={"exp_avg_lr_1": lambda h: 0.0},
        prepare=functools.partial(_prepare, decouple=weight_decouple, fixed=fixed_decay),
        reads_params=True,
        kind=_protocol.SliceWise if cautious else _protocol.ElementWise,  # the mask's count: the leaf's
        paths=True,
        real_only=_REAL_ONLY,
        compute_dtype=_scalars.at_least_float32,
    )


__all__ = ["LaPropState", "laprop"]
