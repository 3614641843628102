"""RMSProp as optax writes it: `scale_by_rms`, `scale_by_stddev` (the centered form) and
`scale_by_bias_corrected_rms` (Adam without a first moment), each dividing by the root of a moving
average of squared gradients; TF's RMSProp and torch's rule are in `rmsprop.py`."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp
from jax import lax

from gradtx._algorithms.adam import _check_common, corrected_step
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.formulas import corrections
from gradtx._core.rule import SQUARES, update_rule


class ScaleByRmsState(NamedTuple):
    """State of `scale_by_rms`."""

    count: _protocol.Count  # int32: completed updates
    nu: _protocol.Updates  # second moment (starts at `initial_scale`)


class ScaleByRStdDevState(NamedTuple):
    """State of `scale_by_stddev`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # second moment (starts at `initial_scale`)


def _scaling(var, h, *, eps_in_sqrt: bool):
    """`1 / sqrt(var + eps)` (optax's default) or `1 / (sqrt(var) + eps)`."""
    return lax.rsqrt(var + h.eps) if eps_in_sqrt else 1 / (jnp.sqrt(var) + h.eps)


def _rms_leaf(g, nu, h, *, eps_in_sqrt: bool, bias_correction: bool):
    nu = _formulas.optax_moment(nu, _formulas.abs_sq(g), h.decay)
    return _scaling(nu / h.bc2 if bias_correction else nu, h, eps_in_sqrt=eps_in_sqrt) * g, nu


def _stddev_leaf(g, mu, nu, h, *, eps_in_sqrt: bool, bias_correction: bool):
    mu = _formulas.optax_moment(mu, g, h.decay)
    nu = _formulas.optax_moment(nu, _formulas.abs_sq(g), h.decay)
    mu_hat, nu_hat = (mu / h.bc2, nu / h.bc2) if bias_correction else (mu, nu)
    return _scaling(nu_hat - _formulas.abs_sq(mu_hat), h, eps_in_sqrt=eps_in_sqrt) * g, mu, nu


def _rms_rule(fn, state, leaf, slots, decay, eps, initial_scale, eps_in_sqrt, bias_correction):
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_number(fn, "initial_scale", initial_scale)
    _checks.check_nonnegative(fn, "initial_scale", initial_scale)
    _checks.check_bool(fn, "eps_in_sqrt", eps_in_sqrt)
    _checks.check_bool(fn, "bias_correction", bias_correction)
    return update_rule(
        fn,
        state,
        functools.partial(leaf, eps_in_sqrt=eps_in_sqrt, bias_correction=bias_correction),
        hyper={"decay": decay, "eps": eps},
        slots=slots,
        prepare=functools.partial(corrections, b1=None, b2="decay") if bias_correction else None,
    )


@_registry.transform()
def scale_by_rms(
    decay: _protocol.ScalarOrSchedule = 0.9,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    initial_scale: Any = 0.0,
    eps_in_sqrt: bool = True,
    bias_correction: bool = False,
) -> _protocol.GradientTransformation:
    r"""Divide by the root of a moving average of squared gradients (optax's RMSProp scaling).

    .. math::
        \nu_t = \rho \nu_{t-1} + (1-\rho) g_t^2, \qquad u_t = \frac{g_t}{\sqrt{\hat\nu_t + \epsilon}}

    with :math:`\hat\nu_t = \nu_t` (or :math:`\nu_t / (1-\rho^t)` with `bias_correction`);
    `eps_in_sqrt=False` divides by :math:`\sqrt{\hat\nu_t} + \epsilon` instead. The numbers of
    `optax.scale_by_rms`; TF's RMSProp (`rms` starting at ones, the rate in the kernel) is
    `scale_by_rmsprop`. A row-sparse gradient is densified first.

    Args:
      decay: :math:`\rho`, the decay of the second moment, in [0, 1].
      eps: added to the mean square (or to its root), >= 0.
      initial_scale: the second moment's initial value, >= 0.
      eps_in_sqrt: add `eps` under the root (optax's default) or to it.
      bias_correction: divide the second moment by :math:`1-\rho^t`.

    Returns:
      An `ElementWise` transform with state `ScaleByRmsState(count, nu)`.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative `eps` / `initial_scale`.
      TypeError: for a non-bool `eps_in_sqrt` or `bias_correction`, or a schedule as `initial_scale`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_rms(decay=0.75, eps=0.0)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]  # 2 / sqrt(0.25 * 4)
        Array([2.], dtype=float32)

    References:
      Tieleman, Hinton, *Lecture 6.5 - RMSProp*, COURSERA: Neural Networks for Machine
      Learning, 2012.
    """
    return _rms_rule(
        "scale_by_rms",
        ScaleByRmsState,
        _rms_leaf,
        {"nu": initial_scale},
        decay,
        eps,
        initial_scale,
        eps_in_sqrt,
        bias_correction,
    )


@_registry.transform()
def scale_by_stddev(
    decay: _protocol.ScalarOrSchedule = 0.9,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    initial_scale: Any = 0.0,
    eps_in_sqrt: bool = True,
    bias_correction: bool = False,
) -> _protocol.GradientTransformation:
    r"""Divide by the root of a moving variance of the gradients (optax's centered RMSProp scaling).

    .. math::
        \mu_t = \rho \mu_{t-1} + (1-\rho) g_t, \quad \nu_t = \rho \nu_{t-1} + (1-\rho) g_t^2, \quad
        u_t = \frac{g_t}{\sqrt{\hat\nu_t - \hat\mu_t^2 + \epsilon}}

    with the same options as `scale_by_rms` (bias correction divides both moments by
    :math:`1-\rho^t`). The numbers of `optax.scale_by_stddev`. A row-sparse gradient is
    densified first.

    Args:
      decay: :math:`\rho`, the decay of both moments, in [0, 1].
      eps: added to the variance (or to its root), >= 0.
      initial_scale: the second moment's initial value, >= 0.
      eps_in_sqrt: add `eps` under the root (optax's default) or to it.
      bias_correction: divide both moments by :math:`1-\rho^t`.

    Returns:
      An `ElementWise` transform with state `ScaleByRStdDevState(count, mu, nu)`.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative `eps` / `initial_scale`.
      TypeError: for a non-bool `eps_in_sqrt` or `bias_correction`, or a schedule as `initial_scale`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_stddev(decay=0.5, eps=0.0)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]  # 2 / sqrt(2 - 1)
        Array([2.], dtype=float32)

    References:
      Graves, *Generating sequences with recurrent neural networks*, 2013 (eq. 38-45).
    """
    return _rms_rule(
        "scale_by_stddev",
        ScaleByRStdDevState,
        _stddev_leaf,
        {"mu": 0.0, "nu": initial_scale},
        decay,
        eps,
        initial_scale,
        eps_in_sqrt,
        bias_correction,
    )


class ScaleByBiasCorrectedRmsState(NamedTuple):
    """State of `scale_by_bias_corrected_rms`."""

    count: _protocol.Count  # int32: completed updates
    nu: _protocol.Updates  # second moment (starts at 0)


def _bias_corrected_rms_leaf(g, v, h):
    v = _formulas.optax_moment(v, _formulas.abs_sq(g), h.decay)
    return corrected_step(g, v, h), v


@_registry.transform()
def scale_by_bias_corrected_rms(
    decay: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Divide by the root of the bias-corrected second moment: Adam without a first moment.

    .. math::
        v_t = \beta v_{t-1} + (1-\beta) g_t^2, \qquad
        u_t = \frac{g_t}{\sqrt{v_t / (1-\beta^t) + \epsilon_{root}} + \epsilon}

    `scale_by_bias_corrected_adam` with :math:`\beta_1 = 0`, without storing the unused
    first moment (`optax.scale_by_rms(eps_in_sqrt=False, bias_correction=True)`): the base
    step of schedule-free AdamW. A row-sparse gradient is densified first.

    Args:
      decay: :math:`\beta`, the decay of the second moment, in [0, 1).
      eps: added to the root, >= 0.
      eps_root: added under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedRmsState(count, nu)`.

    Raises:
      ValueError: if `decay` is outside [0, 1) or `eps` / `eps_root` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_rms(eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 1,
      :math:`\beta_1 = 0`); Defazio et al., *The road less scheduled*, NeurIPS 2024 (Algorithm 1).
    """
    fn = "scale_by_bias_corrected_rms"
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0, high_open=True)
    _check_common(fn, eps, eps_root)

    return update_rule(
        fn,
        ScaleByBiasCorrectedRmsState,
        _bias_corrected_rms_leaf,
        hyper={"decay": decay, "eps": eps, "eps_root": eps_root},
        slots={"nu": SQUARES},
        prepare=functools.partial(corrections, b1=None, b2="decay"),
    )


__all__ = [
    "ScaleByBiasCorrectedRmsState",
    "ScaleByRStdDevState",
    "ScaleByRmsState",
    "scale_by_bias_corrected_rms",
    "scale_by_rms",
    "scale_by_stddev",
]
