"""StableAdamW (Wortsman et al. 2023): AdamW whose step is divided by the RMS of `g / sqrt(v)`,
pytorch-optimizer's `StableAdamW` (`scale_by_stable_adamw`, `stable_adamw`); `debiased_beta`, its decay."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core import sliced as _sliced
from gradtx._core.chain import chain
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


def debiased_beta(beta: Any, t: Any, dtype: Any) -> Any:
    r""":math:`\beta (1 - \beta^{t-1}) / (1 - \beta^t)`: the decay whose moving average is its own
    bias-corrected estimate (pytorch-optimizer's `debias_beta`; 0 at step 1), at the 1-based step `t`.

    Formed with `expm1` of :math:`t \log\beta` (the log of a Python `beta` in double), to float32's
    precision where the quotient's two differences cancel (:math:`\beta_2 = 0.999`).
    """
    t = jnp.asarray(t, dtype)
    if isinstance(beta, (int, float)):
        if beta == 0:
            return jnp.zeros((), dtype)
        return jnp.where(
            t > 1, beta * (jnp.expm1((t - 1) * math.log(beta)) / jnp.expm1(t * math.log(beta))), 0
        )
    beta = jnp.asarray(beta, dtype)
    positive = beta > 0
    log = jnp.log(jnp.where(positive, beta, 0.5))
    return jnp.where((t > 1) & positive, beta * (jnp.expm1((t - 1) * log) / jnp.expm1(t * log)), 0.0)


def update_rms(g: Any, v: Any, eps: Any, path: Any = None) -> Any:
    r"""StableAdamW's divisor :math:`\max(1, \sqrt{\operatorname{mean}(g^2 / \max(v, \epsilon^2))})` of the
    whole leaf at `path` (pytorch-optimizer's `get_stable_adamw_rms`), on ZeRO's slices too (`_sliced`)."""
    ratios = jnp.sum(g * g / jnp.maximum(v, eps * eps))
    return jnp.maximum(jnp.sqrt(_sliced.total(ratios) / _sliced.leaf_size(path, g)), 1.0)


class ScaleByStableAdamWState(NamedTuple):
    """State of `scale_by_stable_adamw` (pytorch-optimizer's names)."""

    count: _protocol.Count  # int32: completed updates (the reference's `step`)
    exp_avg: _protocol.Updates  # the bias-corrected first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # the bias-corrected second moment (starts at 0)


def _stable_adamw_leaf(g, exp_avg, exp_avg_sq, *rest, decays, path):
    w, h = rest if decays else (None, rest[0])
    wide = _scalars.at_least_float32(g.dtype)
    x = g.astype(wide)
    m, v = exp_avg.astype(wide), exp_avg_sq.astype(wide)
    b1, b2 = debiased_beta(h.b1, h.t, wide), debiased_beta(h.b2, h.t, wide)
    m = m + (x - m) * (1 - b1)  # torch's lerp
    v = b2 * v + (1 - b2) * x * x
    u = m / (jnp.sqrt(v) + h.eps)
    if decays:
        u = u + h.weight_decay * w.astype(wide)
    return (u / update_rms(x, v, h.eps, path)).astype(g.dtype), m, v


def _check_betas(fn: str, b1: Any, b2: Any) -> None:
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)


@_registry.transform()
def scale_by_stable_adamw(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""StableAdamW's direction: AdamW's, divided by the RMS of :math:`g / \sqrt{v}` where it exceeds 1.

    .. math::
        \hat\beta_t = \beta \frac{1 - \beta^{t-1}}{1 - \beta^t}, \quad
        m_t = \hat\beta_{1,t} m_{t-1} + (1 - \hat\beta_{1,t}) g_t, \quad
        v_t = \hat\beta_{2,t} v_{t-1} + (1 - \hat\beta_{2,t}) g_t^2, \\
        r_t = \max\Big(1, \sqrt{\operatorname{mean}\big(g_t^2 / \max(v_t, \epsilon^2)\big)}\Big), \quad
        u_t = \Big(\frac{m_t}{\sqrt{v_t} + \epsilon} + \lambda w_{t-1}\Big) \Big/ r_t

    The decays :math:`\hat\beta_t` make each moment its own bias-corrected estimate (Adafactor's
    form); :math:`r_t` is taken over each parameter (AdaFactor's update clipping), so the decoupled
    decay :math:`\lambda w` is scaled by the rate :math:`\eta / r_t` as the step is. These are the
    numbers of pytorch-optimizer's `StableAdamW`. The moments and the RMS are computed in float32 at
    least. A row-sparse gradient is densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the second moment (its square bounds it below in the RMS), >= 0.
      weight_decay: :math:`\lambda`, the decoupled decay (divided by :math:`r_t` too), >= 0.

    Returns:
      A `SliceWise` transform with state `ScaleByStableAdamWState(count, exp_avg, exp_avg_sq)`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or `weight_decay`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_stable_adamw(eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]  # step 1: m = g, v = g^2, r = 1
        Array([ 1., -1.], dtype=float32)

    References:
      Wortsman et al., *Stable and low-precision training for large-scale vision-language models*,
      NeurIPS 2023 (Algorithm 2); pytorch-optimizer's `StableAdamW`.
    """
    fn = "scale_by_stable_adamw"
    _check_betas(fn, b1, b2)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    decays = _checks.is_schedule(weight_decay) or not (
        isinstance(weight_decay, (int, float)) and weight_decay == 0
    )
    return update_rule(
        fn,
        ScaleByStableAdamWState,
        functools.partial(_stable_adamw_leaf, decays=decays),
        hyper={"b1": b1, "b2": b2, "eps": eps, **({"weight_decay": weight_decay} if decays else {})},
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES},
        reads_params=decays,
        kind=_protocol.SliceWise,  # the RMS is the whole leaf's, on ZeRO's slices too (`update_rms`)
        real_only=_REAL_ONLY,
        compute_dtype=_scalars.at_least_float32,
        paths=True,
    )


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.StableAdamW",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "eps": "eps",
        },
        defaults={"lr": 1e-3, "betas": (0.9, 0.99)},
        fixed={"maximize": False},
        free=("foreach", "kahan_sum"),
    )
)
def stable_adamw(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    weight_decay: _protocol.ScalarOrSchedule = 1e-2,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    weight_decouple: bool = True,
) -> _protocol.GradientTransformation:
    r"""StableAdamW: AdamW with AdaFactor's update clipping, the rate divided by the RMS of :math:`g/\sqrt v`.

    `chain(scale_by_stable_adamw(b1, b2, eps, weight_decay), scale_by_learning_rate(learning_rate))`:
    :math:`w_t = w_{t-1} - \frac{\eta}{r_t}\big(\frac{m_t}{\sqrt{v_t}+\epsilon} + \lambda w_{t-1}\big)`,
    the numbers and defaults of pytorch-optimizer's `StableAdamW` (`gradtx.get("StableAdamW", lr=...,
    betas=...)` takes its arguments). `weight_decouple=False` adds :math:`\lambda w` to the gradient
    instead (before the moments and the RMS). The reference's `kahan_sum` is accepted and dropped: it
    is Kahan-compensated summation into float16 / bfloat16 params, a matter of the storage precision
    (nothing in float32); gradtx adds the update to the params as they are. Its slots are `exp_avg` and
    `exp_avg_sq`. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      weight_decay: :math:`\lambda`, >= 0.
      eps: added to the root of the second moment, >= 0.
      weight_decouple: decay the weights directly (True) or through the gradient (False).

    Returns:
      A `SliceWise` chain; its slots are `exp_avg` and `exp_avg_sq`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.stable_adamw(0.1, weight_decay=0.0, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0]  # -lr sign(g) at step 1
        Array([-0.1,  0.1], dtype=float32)

    References:
      Wortsman et al., *Stable and low-precision training for large-scale vision-language models*,
      NeurIPS 2023; pytorch-optimizer's `StableAdamW` (the reference of the tests).
    """
    fn = "stable_adamw"
    _check_betas(fn, b1, b2)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_bool(fn, "weight_decouple", weight_decouple)
    _checks.check_learning_rate(fn, learning_rate)
    if weight_decouple:
        return chain(scale_by_stable_adamw(b1, b2, eps, weight_decay), scale_by_learning_rate(learning_rate))
    return chain(
        add_decayed_weights(weight_decay),
        scale_by_stable_adamw(b1, b2, eps),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByStableAdamWState", "scale_by_stable_adamw", "stable_adamw"]
