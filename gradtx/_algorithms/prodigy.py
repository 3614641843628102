"""Prodigy (optax's numbers): `scale_by_prodigy`, `prodigy`."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.formulas import total_sum
from gradtx._core.rule import SQUARES, TREE_SCALARS, update_rule


class ScaleByProdigyState(NamedTuple):
    """State of `scale_by_prodigy` (optax's `ProdigyState` fields; the count first)."""

    count: _protocol.Count  # int32: completed updates
    exp_avg: _protocol.Updates  # first moment of d * g
    exp_avg_sq: _protocol.Updates  # second moment of d * g
    grad_sum: _protocol.Updates  # the weighted sum of the gradients
    params0: _protocol.Updates  # the initial params
    estim_lr: jax.Array  # d, the distance estimate
    numerator_weighted: jax.Array  # the weighted numerator of d


def _step_size(h):
    """The step size: the distance, the rate and Adam's bias correction, `d lr sqrt(1-b2^t) / (1-b1^t)`."""
    bc = ((1 - h.b2**h.t) ** 0.5) / (1 - h.b1**h.t)
    return jnp.asarray(h.estim_lr * h.learning_rate * bc, h.estim_lr.dtype)


def _prodigy_step(gs, ms, vs, ss, x0s, ws, h, *, safeguard_warmup):
    d, d0 = h.estim_lr, h.estim_lr0
    dlr = _step_size(h)
    dgs = [d * g for g in gs]
    numerator = total_sum([jnp.sum(g * (x0 - w)) for g, x0, w in zip(gs, x0s, ws, strict=True)])
    ms = [h.b1 * m + (1 - h.b1) * dg for m, dg in zip(ms, dgs, strict=True)]
    vs = [h.b2 * v + (1 - h.b2) * dg * dg for v, dg in zip(vs, dgs, strict=True)]
    weight = d if safeguard_warmup else dlr
    ss = [h.b3 * s + weight * dg / d0 for s, dg in zip(ss, dgs, strict=True)]
    r = h.b3 * h.numerator_weighted + (d / d0) * dlr * numerator
    d = jnp.maximum(d, h.estim_lr_coef * r / total_sum([jnp.sum(jnp.abs(s)) for s in ss]))
    updates = [
        -h.weight_decay * dlr * w - dlr * m / (jnp.sqrt(v) + d * h.eps)
        for m, v, w in zip(ms, vs, ws, strict=True)
    ]
    return updates, ms, vs, ss, x0s, {"estim_lr": d, "numerator_weighted": r}


def _check_common(fn, learning_rate, b1, b2, eps, estim_lr0, weight_decay):
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_positive(fn, "estim_lr0", estim_lr0)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)


@_registry.transform()
def scale_by_prodigy(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule | None = None,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    estim_lr0: _protocol.ScalarOrSchedule = 1e-6,
    estim_lr_coef: _protocol.ScalarOrSchedule = 1.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    safeguard_warmup: bool = False,
) -> _protocol.GradientTransformation:
    r"""Prodigy's AdamW step at the estimated rate :math:`d_t`: the whole optimizer, no rate after it.

    With :math:`\eta_t` the rate (a schedule around 1), :math:`x_0` the initial params,
    :math:`\hat\eta_t = d_t \eta_t \sqrt{1-\beta_2^t}/(1-\beta_1^t)` and the sums and the
    inner product over every element of every leaf:

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) d_t g_t, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) d_t^2 g_t^2, \quad
        s_t = \beta_3 s_{t-1} + \hat\eta_t d_t g_t / d_0

        r_t = \beta_3 r_{t-1} + (d_t / d_0)\, \hat\eta_t \langle g_t, x_0 - x_t \rangle, \quad
        d_{t+1} = \max\big(d_t, c\, r_t / \lVert s_t \rVert_1\big)

        u_t = -\lambda \hat\eta_t x_t - \hat\eta_t m_t / (\sqrt{v_t} + d_{t+1} \epsilon)

    (`safeguard_warmup` puts :math:`d_t` for :math:`\hat\eta_t` in :math:`s_t`, so a warmup's
    small rate does not shrink the denominator). The numbers of `optax.contrib.prodigy`. It
    reads the params; a row-sparse gradient is densified. Every reduction is over all
    elements together (exact on ZeRO's slices and packed parameters), so it is
    `ElementWise`. Real parameters only.

    Args:
      learning_rate: :math:`\eta_t`, a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: :math:`\beta_3`, decay of `s` and `r`, in [0, 1]; None: :math:`\sqrt{\beta_2}`.
      eps: added to the root of the second moment (times :math:`d_{t+1}`), >= 0.
      estim_lr0: :math:`d_0`, the initial (under-)estimate of the rate, > 0.
      estim_lr_coef: :math:`c`, multiplies each new estimate, > 0.
      weight_decay: :math:`\lambda`, decoupled decay (times :math:`\hat\eta_t`), >= 0.
      safeguard_warmup: leave the rate out of `s` (for warmups).

    Returns:
      An `ElementWise` transform with state `ScaleByProdigyState(count, m, v, s, x0, d, r)`.

    Raises:
      ValueError: for a bad rate, beta, epsilon, estimate or decay; at update time, if
        `params` is missing.
      TypeError: for a non-bool `safeguard_warmup`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_prodigy()
        >>> params = jnp.array([1.0, -2.0])
        >>> state = tx.init(params)
        >>> for _ in range(10):  # a constant gradient: the params travel steadily
        ...     u, state = tx.update(jnp.array([1.0, -1.0]), state, params)
        ...     params = params + u
        >>> round(float(state.estim_lr) / 1e-6, 1)  # the estimate has grown from estim_lr0 = 1e-6
        17.0

    References:
      Mishchenko, Defazio, *Prodigy: an expeditiously adaptive parameter-free learner*,
      ICML 2024 (arXiv:2306.06101), Algorithm 4.
    """
    fn = "scale_by_prodigy"
    _check_common(fn, learning_rate, b1, b2, eps, estim_lr0, weight_decay)
    _checks.check_positive(fn, "estim_lr_coef", estim_lr_coef)
    _checks.check_bool(fn, "safeguard_warmup", safeguard_warmup)
    if b3 is None:
        b2_: Any = b2
        b3 = (lambda count: _hyper.resolve(b2_, count, "b2") ** 0.5) if _checks.is_schedule(b2_) else b2_**0.5
    else:
        _checks.check_in_range(fn, "b3", b3, 0.0, 1.0)
    hyper = {"learning_rate": learning_rate, "b1": b1, "b2": b2, "b3": b3, "eps": eps, "estim_lr0": estim_lr0,
             "estim_lr_coef": estim_lr_coef, "weight_decay": weight_decay}  # fmt: skip
    return update_rule(
        fn,
        ScaleByProdigyState,
        functools.partial(_prodigy_step, safeguard_warmup=safeguard_warmup),
        hyper=hyper,
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES, "grad_sum": 0.0, "params0": jnp.copy},
        scalars={"estim_lr": lambda h: h.estim_lr0, "numerator_weighted": lambda h: 0.0},
        **TREE_SCALARS,
    )


@_registry.optimizer("Prodigy")
def prodigy(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule | None = None,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    estim_lr0: _protocol.ScalarOrSchedule = 1e-6,
    estim_lr_coef: _protocol.ScalarOrSchedule = 1.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    safeguard_warmup: bool = False,
) -> _protocol.GradientTransformation:
    r"""Prodigy: AdamW whose rate is a distance estimate grown from the gradients (`optax.contrib.prodigy`).

    `scale_by_prodigy(...)` itself: the rate and the decay act inside the estimate, so the
    building block is the whole optimizer (its state is `ScaleByProdigyState`). Give
    `learning_rate` as a schedule around 1 (e.g. a cosine decay from 1 to 0 with a warmup).

    Args:
      learning_rate: a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: decay of the estimate's sums, in [0, 1]; None: `sqrt(b2)`.
      eps: added to the root of the second moment (times the estimate), >= 0.
      estim_lr0: the initial (under-)estimate of the rate, > 0.
      estim_lr_coef: multiplies each new estimate, > 0.
      weight_decay: decoupled decay (times the estimated rate), >= 0.
      safeguard_warmup: leave the rate out of the estimate's denominator (for warmups).

    Returns:
      An `ElementWise` transform with state `ScaleByProdigyState(count, m, v, s, x0, d, r)`.

    Raises:
      ValueError: for a bad rate, beta, epsilon, estimate or decay.
      TypeError: for a non-bool `safeguard_warmup`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.prodigy(weight_decay=1e-3)
        >>> params = {"w": jnp.array([1.0, -2.0])}
        >>> state = tx.init(params)
        >>> u, state = tx.update(params, state, params)
        >>> sorted(gradtx.slot_names(state))
        ['exp_avg', 'exp_avg_sq', 'grad_sum', 'params0']

    References:
      Mishchenko, Defazio, *Prodigy: an expeditiously adaptive parameter-free learner*,
      ICML 2024 (arXiv:2306.06101).
    """
    return scale_by_prodigy(
        learning_rate,
        b1,
        b2,
        b3,
        eps,
        estim_lr0,
        estim_lr_coef,
        weight_decay,
        safeguard_warmup=safeguard_warmup,
    )


__all__ = ["ScaleByProdigyState", "prodigy", "scale_by_prodigy"]
