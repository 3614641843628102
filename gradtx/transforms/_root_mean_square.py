"""optax's RMS scalings: `scale_by_rms`, `scale_by_stddev` (centered) and `scale_by_rss` (Adagrad).

These are optax's numbers (its RMSProp and Adagrad); TF's RMSProp and Adagrad kernels, with
their slot initial values and the rate inside the kernel, are `scale_by_rmsprop` and
`scale_by_adagrad`.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp
from jax import lax

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core.rule import update_rule
from gradtx.transforms._bias_corrected_adam import corrections


class ScaleByRmsState(NamedTuple):
    """State of `scale_by_rms`."""

    count: _protocol.Count  # int32: completed updates
    nu: _protocol.Updates  # second moment (starts at `initial_scale`)


class ScaleByRStdDevState(NamedTuple):
    """State of `scale_by_stddev`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # second moment (starts at `initial_scale`)


class ScaleByRssState(NamedTuple):
    """State of `scale_by_rss`."""

    count: _protocol.Count  # int32: completed updates
    sum_of_squares: _protocol.Updates  # the sum of squared gradients (starts at the initial value)


def _scaling(var, h, *, eps_in_sqrt: bool):
    """`1 / sqrt(var + eps)` (optax's default) or `1 / (sqrt(var) + eps)`."""
    return lax.rsqrt(var + h.eps) if eps_in_sqrt else 1 / (jnp.sqrt(var) + h.eps)


def _rms_leaf(g, nu, h, *, eps_in_sqrt: bool, bias_correction: bool):
    nu = _formulas.moment_blend(nu, _formulas.abs_sq(g), h.decay)
    return _scaling(nu / h.bc2 if bias_correction else nu, h, eps_in_sqrt=eps_in_sqrt) * g, nu


def _stddev_leaf(g, mu, nu, h, *, eps_in_sqrt: bool, bias_correction: bool):
    mu = _formulas.moment_blend(mu, g, h.decay)
    nu = _formulas.moment_blend(nu, _formulas.abs_sq(g), h.decay)
    mu_hat, nu_hat = (mu / h.bc2, nu / h.bc2) if bias_correction else (mu, nu)
    return _scaling(nu_hat - _formulas.abs_sq(mu_hat), h, eps_in_sqrt=eps_in_sqrt) * g, mu, nu


def _rss_leaf(g, sum_of_squares, h):
    sum_of_squares = _formulas.abs_sq(g) + sum_of_squares
    scaling = jnp.where(sum_of_squares > 0, lax.rsqrt(sum_of_squares + h.eps), 0.0)
    return scaling * g, sum_of_squares


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


@_factory.api
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


@_factory.api
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


@_factory.api
def scale_by_rss(
    initial_accumulator_value: Any = 0.1, eps: _protocol.ScalarOrSchedule = 1e-7
) -> _protocol.GradientTransformation:
    r"""Divide by the root of the sum of squared gradients (optax's Adagrad scaling).

    .. math::
        s_t = s_{t-1} + g_t^2, \qquad u_t = \frac{g_t}{\sqrt{s_t + \epsilon}} \ (0 \text{ where } s_t = 0)

    The numbers of `optax.scale_by_rss`; TF's Adagrad kernel is `scale_by_adagrad`. A
    row-sparse gradient is densified first.

    Args:
      initial_accumulator_value: the sum's initial value, >= 0.
      eps: added to the sum under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByRssState(count, sum_of_squares)`.

    Raises:
      ValueError: for a negative `initial_accumulator_value` or `eps`.
      TypeError: for an `initial_accumulator_value` that is a schedule.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_rss(initial_accumulator_value=0.0, eps=0.0)
        >>> tx.update(jnp.array([3.0, 0.0]), tx.init(jnp.zeros(2)))[0]  # 3 / sqrt(9); 0 stays 0
        Array([1., 0.], dtype=float32)

    References:
      Duchi, Hazan, Singer, *Adaptive subgradient methods for online learning and stochastic
      optimization*, JMLR 2011.
    """
    fn = "scale_by_rss"
    _checks.check_number(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "eps", eps)
    return update_rule(
        fn,
        ScaleByRssState,
        _rss_leaf,
        hyper={"eps": eps},
        slots={"sum_of_squares": initial_accumulator_value},
    )
