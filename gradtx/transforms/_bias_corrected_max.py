"""AMSGrad and AdaMax as optax writes them: Adam's bias-corrected moments with a running maximum.

`scale_by_amsgrad` (RETURNN's AMSGrad) and `scale_by_adamax` (TF's ApplyAdaMax, with its
`beta1_power` slot) keep their systems' numbers; these two are optax's.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core.rule import Slot, update_rule
from gradtx.transforms._bias_corrected_adam import corrections, squared_as


class ScaleByBiasCorrectedAmsgradState(NamedTuple):
    """State of `scale_by_bias_corrected_amsgrad`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # first moment (starts at 0)
    v: _protocol.Updates  # second moment (starts at 0)
    v_max: _protocol.Updates  # the running maximum of the (corrected) second moment (starts at 0)


class ScaleByBiasCorrectedAdamaxState(NamedTuple):
    """State of `scale_by_bias_corrected_adamax`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # first moment (starts at 0)
    v: _protocol.Updates  # the decayed infinity norm (starts at 0)


def _amsgrad_leaf(g, m, v, v_max, h, *, correct_m: bool, correct_v: bool):
    m = _formulas.moment_blend(m, g, h.b1)
    v = _formulas.moment_blend(v, squared_as(g, v), h.b2)
    v_max = jnp.maximum(v_max, v / h.bc2 if correct_v else v)
    return (m / h.bc1 if correct_m else m) / (jnp.sqrt(v_max + h.eps_root) + h.eps), m, v, v_max


def _adamax_leaf(g, m, v, h):
    m = _formulas.moment_blend(m, g, h.b1)
    v = jnp.maximum(jnp.abs(g) + h.eps, h.b2 * v)
    return (m / h.bc1) / v, m, v


def _check_betas(fn: str, b1: Any, b2: Any, eps: Any) -> None:
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)


@_factory.api
def scale_by_bias_corrected_amsgrad(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
    bias_correction_mu: bool = True,
    bias_correction_nu: bool = True,
) -> _protocol.GradientTransformation:
    r"""AMSGrad: Adam's step over the running maximum of the (bias-corrected) second moment.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \quad
        \bar v_t = \max(\bar v_{t-1}, \frac{v_t}{1-\beta_2^t}), \quad
        u_t = \frac{m_t / (1-\beta_1^t)}{\sqrt{\bar v_t + \epsilon_{root}} + \epsilon}

    Either correction can be switched off. The numbers of `optax.scale_by_amsgrad`;
    RETURNN's AMSGrad is `scale_by_amsgrad`. A row-sparse gradient is densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root, >= 0.
      eps_root: added under the root, >= 0.
      mu_dtype: dtype of `m` (default: each param's dtype).
      nu_dtype: dtype of `v` and `v_max` (default: each param's dtype).
      bias_correction_mu: divide the first moment by :math:`1-\beta_1^t`.
      bias_correction_nu: divide the second moment by :math:`1-\beta_2^t` before the maximum.

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedAmsgradState(count, m, v, v_max)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.
      TypeError: for non-bool corrections or a `mu_dtype` / `nu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_amsgrad(eps=0.0)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0].round(4)  # the first step: sign(g)
        Array([1.], dtype=float32)

    References:
      Reddi, Kale, Kumar, *On the convergence of Adam and beyond*, ICLR 2018.
    """
    fn = "scale_by_bias_corrected_amsgrad"
    _check_betas(fn, b1, b2, eps)
    _checks.check_nonnegative(fn, "eps_root", eps_root)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_float_dtype(fn, "nu_dtype", nu_dtype)
    _checks.check_bool(fn, "bias_correction_mu", bias_correction_mu)
    _checks.check_bool(fn, "bias_correction_nu", bias_correction_nu)
    return update_rule(
        fn,
        ScaleByBiasCorrectedAmsgradState,
        functools.partial(_amsgrad_leaf, correct_m=bias_correction_mu, correct_v=bias_correction_nu),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"m": Slot(0.0, mu_dtype), "v": Slot(0.0, nu_dtype), "v_max": Slot(0.0, nu_dtype)},
        prepare=corrections,
    )


@_factory.api
def scale_by_bias_corrected_adamax(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""AdaMax: the bias-corrected first moment over a decayed infinity norm of the gradients.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad v_t = \max(|g_t| + \epsilon, \beta_2 v_{t-1}),
        \quad u_t = \frac{m_t}{(1-\beta_1^t)\, v_t}

    The numbers of `optax.scale_by_adamax` (epsilon inside the maximum); TF's ApplyAdaMax
    is `scale_by_adamax`. A row-sparse gradient is densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to each gradient's magnitude, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedAdamaxState(count, m, v)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_adamax(eps=0.0)
        >>> tx.update(jnp.array([-2.0]), tx.init(jnp.zeros(1)))[0].round(4)  # the first step: sign(g)
        Array([-1.], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 2).
    """
    _check_betas("scale_by_bias_corrected_adamax", b1, b2, eps)
    return update_rule(
        "scale_by_bias_corrected_adamax",
        ScaleByBiasCorrectedAdamaxState,
        _adamax_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": 0.0, "v": 0.0},
        prepare=functools.partial(corrections, b2=None),
    )
