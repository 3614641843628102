"""D-Adaptation AdamW (optax's numbers): `scale_by_dadapt_adamw`, `dadapt_adamw`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradtx._algorithms.prodigy import _check_common, _step_size
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.formulas import total_sum
from gradtx._core.rule import SQUARES, TREE_SCALARS, update_rule


class ScaleByDAdaptAdamWState(NamedTuple):
    """State of `scale_by_dadapt_adamw` (optax's `DAdaptAdamWState` fields; the count first)."""

    count: _protocol.Count  # int32: completed updates
    exp_avg: _protocol.Updates  # first moment of d * g
    exp_avg_sq: _protocol.Updates  # second moment of g
    grad_sum: _protocol.Updates  # the weighted sum of d * g
    estim_lr: jax.Array  # d, the distance estimate
    numerator_weighted: jax.Array  # the weighted numerator of d


def _dadapt_adamw_step(gs, ms, vs, ss, ws, h):
    sb2 = h.b2**0.5
    dlr = _step_size(h)
    numerator = total_sum(
        [jnp.sum(g * (s / (jnp.sqrt(v) + h.eps))) for g, s, v in zip(gs, ss, vs, strict=True)]
    )
    ms = [h.b1 * m + (1 - h.b1) * dlr * g for m, g in zip(ms, gs, strict=True)]
    vs = [h.b2 * v + (1 - h.b2) * g * g for v, g in zip(vs, gs, strict=True)]
    ss = [sb2 * s + (1 - sb2) * dlr * g for s, g in zip(ss, gs, strict=True)]
    r = sb2 * h.numerator_weighted + (1 - sb2) * dlr * numerator
    d = jnp.maximum(h.estim_lr, r / ((1 - sb2) * total_sum([jnp.sum(jnp.abs(s)) for s in ss])))
    updates = [
        -h.weight_decay * dlr * w - m / (jnp.sqrt(v) + h.eps) for m, v, w in zip(ms, vs, ws, strict=True)
    ]
    return updates, ms, vs, ss, {"estim_lr": d, "numerator_weighted": r}


@_registry.transform()
def scale_by_dadapt_adamw(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    estim_lr0: _protocol.ScalarOrSchedule = 1e-6,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""D-Adapted AdamW's step at the estimated rate :math:`d_t`: the whole optimizer, no rate after it.

    With :math:`\eta_t` the rate (a schedule around 1),
    :math:`\hat\eta_t = d_t \eta_t \sqrt{1-\beta_2^t}/(1-\beta_1^t)`, :math:`\beta = \sqrt{\beta_2}`
    and the sums over every element of every leaf:

    .. math::
        r_t = \beta r_{t-1}
            + (1-\beta)\, \hat\eta_t \langle g_t, s_{t-1} / (\sqrt{v_{t-1}} + \epsilon) \rangle

        m_t = \beta_1 m_{t-1} + (1-\beta_1) \hat\eta_t g_t, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \quad
        s_t = \beta s_{t-1} + (1-\beta) \hat\eta_t g_t

        d_{t+1} = \max\big(d_t, r_t / ((1-\beta) \lVert s_t \rVert_1)\big), \quad
        u_t = -\lambda \hat\eta_t x_t - m_t / (\sqrt{v_t} + \epsilon)

    The numbers of `optax.contrib.dadapt_adamw`. It reads the params; a row-sparse gradient
    is densified; `ElementWise` (every reduction over all elements together). Real
    parameters only.

    Args:
      learning_rate: :math:`\eta_t`, a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the second moment, >= 0.
      estim_lr0: :math:`d_0`, the initial (under-)estimate of the rate, > 0.
      weight_decay: :math:`\lambda`, decoupled decay (times :math:`\hat\eta_t`), >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByDAdaptAdamWState(count, m, v, s, d, r)`.

    Raises:
      ValueError: for a bad rate, beta, epsilon, estimate or decay; at update time, if
        `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_dadapt_adamw()
        >>> params = jnp.array([1.0, -2.0])
        >>> state = tx.init(params)
        >>> for _ in range(10):  # a constant gradient: the params travel steadily
        ...     u, state = tx.update(jnp.array([1.0, -1.0]), state, params)
        ...     params = params + u
        >>> round(float(state.estim_lr) / 1e-6, 1)  # the estimate has grown from estim_lr0 = 1e-6
        426.1

    References:
      Defazio, Mishchenko, *Learning-rate-free learning by D-adaptation*, ICML 2023
      (arXiv:2301.07733), Algorithm 4 (Adam).
    """
    fn = "scale_by_dadapt_adamw"
    _check_common(fn, learning_rate, b1, b2, eps, estim_lr0, weight_decay)
    hyper = {"learning_rate": learning_rate, "b1": b1, "b2": b2, "eps": eps, "estim_lr0": estim_lr0,
             "weight_decay": weight_decay}  # fmt: skip
    return update_rule(
        fn,
        ScaleByDAdaptAdamWState,
        _dadapt_adamw_step,
        hyper=hyper,
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES, "grad_sum": 0.0},
        scalars={"estim_lr": lambda h: h.estim_lr0, "numerator_weighted": lambda h: 0.0},
        **TREE_SCALARS,
    )


@_registry.optimizer("DAdaptAdamW")
def dadapt_adamw(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    estim_lr0: _protocol.ScalarOrSchedule = 1e-6,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""D-Adapted AdamW: AdamW whose rate is a distance estimate (`optax.contrib.dadapt_adamw`).

    `scale_by_dadapt_adamw(...)` itself: the rate and the decay act inside the estimate, so
    the building block is the whole optimizer. Give `learning_rate` as a schedule around 1.

    Args:
      learning_rate: a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the second moment, >= 0.
      estim_lr0: the initial (under-)estimate of the rate, > 0.
      weight_decay: decoupled decay (times the estimated rate), >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByDAdaptAdamWState(count, m, v, s, d, r)`.

    Raises:
      ValueError: for a bad rate, beta, epsilon, estimate or decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.dadapt_adamw()
        >>> params = {"w": jnp.array([1.0, -2.0])}
        >>> u, state = tx.update(params, tx.init(params), params)
        >>> round(float(state.estim_lr), 9)  # the estimate starts at estim_lr0
        1e-06

    References:
      Defazio, Mishchenko, *Learning-rate-free learning by D-adaptation*, ICML 2023
      (arXiv:2301.07733).
    """
    return scale_by_dadapt_adamw(learning_rate, b1, b2, eps, estim_lr0, weight_decay)


__all__ = ["ScaleByDAdaptAdamWState", "dadapt_adamw", "scale_by_dadapt_adamw"]
