"""RAdam: optax's (`scale_by_radam`, `radam`) and torch's rule."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import (
    _REAL_ONLY,
    _dtype,
    _moments,
    corrected_step,
    first_moment_estimate,
)
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByRadamState(NamedTuple):
    """State of `scale_by_radam`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # second moment (starts at 0)


def _check_betas_and_eps(fn: str, b1: Any, b2: Any, eps: Any, eps_root: Any) -> None:
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps_root", eps_root)


def _radam_prepare(h, state, extra_args, *, nesterov: bool):
    r"""The corrections, and RAdam's rectification at step `t`: :math:`r_t`, and whether :math:`\rho_t`
    reaches the threshold (optax's arithmetic: :math:`\rho_\infty` in double for a Python `b2`)."""
    out = corrections(h, state, extra_args, nesterov=nesterov)
    rho_inf = 2.0 / (1.0 - h.b2) - 1.0
    b2t = h.b2**h.t
    rho = rho_inf - 2 * h.t * b2t / (1 - b2t)
    r2 = (rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)
    out["r"] = jnp.sqrt(jnp.maximum(r2, 0.0))  # r2 < 0 only where rho < 4: never a rectified step
    out["rectified"] = rho >= h.threshold
    return out


def _radam_leaf(g, m, v, h, *, nesterov: bool):
    m = _formulas.optax_moment(m, g, h.b1)
    v = _formulas.optax_moment(v, _formulas.abs_sq(g), h.b2)
    m_hat = first_moment_estimate(m, g, h.b1, h, nesterov)
    return jnp.where(h.rectified, corrected_step(h.r * m_hat, v, h), m_hat), m, v


@_registry.transform()
def scale_by_radam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    threshold: _protocol.ScalarOrSchedule = 5.0,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""Rectified Adam: momentum alone while the second moment's variance is undefined, then rectified Adam.

    .. math::
        m_t, v_t, \hat m_t, \hat v_t \text{ as in Adam}, \qquad
        \rho_\infty = \frac{2}{1-\beta_2} - 1, \quad
        \rho_t = \rho_\infty - \frac{2 t \beta_2^t}{1-\beta_2^t}, \\
        r_t = \sqrt{\frac{(\rho_t-4)(\rho_t-2)\rho_\infty}{(\rho_\infty-4)(\rho_\infty-2)\rho_t}}, \qquad
        u_t = \begin{cases} r_t\, \hat m_t / (\sqrt{\hat v_t + \epsilon_{root}} + \epsilon)
              & \rho_t \ge \text{threshold} \\ \hat m_t & \text{otherwise} \end{cases}

    The rectification replaces a learning-rate warmup: the first steps (about 5 with the
    defaults) are bias-corrected momentum steps. With `nesterov`, :math:`\hat m_t` is
    Nesterov's (as in `scale_by_bias_corrected_adam`). These are the numbers of
    `optax.scale_by_radam`, computed as it computes them (:math:`\rho_\infty` in double
    precision for a Python `b2`, :math:`\rho_t` in float32). A row-sparse gradient is
    densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      threshold: the smallest :math:`\rho_t` that takes a rectified step, >= 4 (the paper's 4,
        optax's 5).
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` transform with state `ScaleByRadamState(count, mu, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1), `eps` / `eps_root` is negative or `threshold` < 4.
      TypeError: for a non-bool `nesterov`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_radam()
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # step 1: the corrected m, g
        Array([ 2. , -0.5], dtype=float32)

    References:
      Liu et al., *On the variance of the adaptive learning rate and beyond*, ICLR 2020
      (Algorithm 2).
    """
    fn = "scale_by_radam"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_in_range(fn, "threshold", threshold, 4.0, math.inf)
    _checks.check_bool(fn, "nesterov", nesterov)

    return update_rule(
        fn,
        ScaleByRadamState,
        functools.partial(_radam_leaf, nesterov=nesterov),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root, "threshold": threshold},
        slots={"mu": 0.0, "nu": SQUARES},
        prepare=functools.partial(_radam_prepare, nesterov=nesterov),
    )


@_registry.optimizer("RAdam")
def radam(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    threshold: _protocol.ScalarOrSchedule = 5.0,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""RAdam: Adam whose adaptive rate is rectified while its variance is large, in place of a warmup.

    `chain(scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.radam`. The
    first steps (until :math:`\rho_t` reaches `threshold`) are momentum steps. A row-sparse
    gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      threshold: the smallest :math:`\rho_t` that takes a rectified step, >= 4.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, `eps_root` or rate, or `threshold` < 4.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.radam(0.1)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr g (momentum)
        [-0.2, 0.05]

    References:
      Liu et al., *On the variance of the adaptive learning rate and beyond*, ICLR 2020.
    """
    return chain(
        scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
        scale_by_learning_rate(learning_rate),
    )


class TorchRAdamState(NamedTuple):
    """State of torch's RAdam rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # second moment (starts at 0)


# 2 B_n / n! for the Bernoulli numbers B_2 .. B_14: the series of `_rho` to float64's digits (s < 1)
_RHO_SERIES = tuple(
    (n, 2 * b / math.factorial(n))
    for n, b in (
        (2, 1 / 6),
        (4, -1 / 30),
        (6, 1 / 42),
        (8, -1 / 30),
        (10, 5 / 66),
        (12, -691 / 2730),
        (14, 7 / 6),
    )
)


def _rho(t: Any, b2: float, dtype: Any) -> Any:
    r"""RAdam's :math:`\rho_t = \rho_\infty - 2 t \beta_2^t / (1 - \beta_2^t)` with torch's (double) digits.

    With :math:`L = -\log\beta_2` and :math:`s = tL`, :math:`\rho_t = \frac{2}{L}(f(-L) - f(s)) - 1` for
    :math:`f(x) = x/(e^x - 1) = \sum_n B_n x^n / n!`. Below :math:`s = 1` its Bernoulli series term by term,
    :math:`\rho_t = t + \sum_{n=2,4,..} \frac{2 B_n}{n!} (L^{n-1} - s^{n-1} t)` (the closed form cancels
    there: :math:`\rho_\infty \approx 2/L` against :math:`\rho_t \approx t`); above it, the closed form.
    """
    big_l = -math.log(b2)
    t = jnp.asarray(t, dtype)
    s = t * big_l
    small = s < 1
    ts, ss = jnp.where(small, t, 0.0), jnp.where(small, s, 0.0)  # the series where it converges
    series = ts
    for n, coef in _RHO_SERIES:  # no power of t alone: s <= 1 keeps every term finite
        series = series + coef * (big_l ** (n - 1) - ss ** (n - 1) * ts)
    rho_inf = 2 / (1 - b2) - 1
    sc = jnp.where(small, 1.0, s)
    closed = rho_inf - (2 / big_l) * (sc / jnp.expm1(sc))
    return jnp.where(small, series, closed)


def _torch_radam_leaf(g, exp_avg, exp_avg_sq, h):
    """`_single_tensor_radam`: `m_hat * r_t * sqrt(bc2) / (sqrt(v) + eps)` where `rho_t > 5`, else `m_hat`."""
    exp_avg, exp_avg_sq = _moments(g, exp_avg, exp_avg_sq, h)
    dtype = _dtype(g)
    m_hat = exp_avg / _formulas.torch_debias(h.b1, h.t, dtype)
    rho_inf = 2 / (1 - h.b2) - 1 if h.b2 > 0 else 1.0
    if rho_inf <= 5:  # rho_t < rho_inf: never rectified
        return m_hat, exp_avg, exp_avg_sq
    rho_t = _rho(h.t, h.b2, dtype)
    rho_c = jnp.maximum(rho_t, 5.0)  # the rectification is only read where rho_t > 5
    rect = jnp.sqrt((rho_c - 4) * (rho_c - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_c))
    adaptive = jnp.sqrt(_formulas.torch_debias(h.b2, h.t, dtype)) / (jnp.sqrt(exp_avg_sq) + h.eps)
    return jnp.where(rho_t > 5, m_hat * adaptive * rect, m_hat), exp_avg, exp_avg_sq


def radam_rule(b1: float, b2: float, eps: float) -> _protocol.GradientTransformation:
    """torch's RAdam direction (rectified where rho_t > 5, else the corrected momentum)."""
    return update_rule(
        "torch_radam", TorchRAdamState, _torch_radam_leaf, hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES}, real_only=_REAL_ONLY,
        compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


__all__ = ["ScaleByRadamState", "radam", "scale_by_radam"]
