"""AMSGrad: RETURNN's (`scale_by_amsgrad`, `amsgrad`) and optax's (`scale_by_bias_corrected_amsgrad`)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import squared_as
from gradtx._algorithms.adamax import _check_betas
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.rule import SQUARES, Slot, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByAmsgradState(NamedTuple):
    """State of `scale_by_amsgrad`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # RETURNN's "m" (starts at 0)
    v: _protocol.Updates  # RETURNN's "v" (starts at 0)
    v_hat: _protocol.Updates  # RETURNN's "v_hat": the running maximum of v (starts at 0)


def _sqrt_step(h, state, extra_args):
    """RETURNN's `decay`: `sqrt(t)` of the step t, in the variables' dtype."""
    del state, extra_args
    return {"sqrt_t": jnp.sqrt(jnp.asarray(h.t).astype(h.b1.dtype))}


def _amsgrad_leaf(g, m, v, v_hat, h, *, decay: bool):
    """RETURNN's AMSGrad: the moments' blends, `v_hat = max(v_hat, v)`, the step `m / (eps + sqrt(v_hat))`."""
    m = _formulas.moment_blend(m, g, h.b1)
    v = _formulas.moment_blend(v, _formulas.abs_sq(g), h.b2)
    v_hat = jnp.maximum(v_hat, v)
    u = m / (h.eps + jnp.sqrt(v_hat))
    return (u / h.sqrt_t if decay else u), m, v, v_hat


@_registry.transform()
def scale_by_amsgrad(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 0.0,
    *,
    decay: bool = False,
) -> _protocol.GradientTransformation:
    r"""AMSGrad's scaling as RETURNN's (no bias correction), not `optax.scale_by_amsgrad` (`optax_compat`'s).

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \quad
        \hat v_t = \max(\hat v_{t-1}, v_t), \quad
        u_t = \frac{m_t}{\epsilon + \sqrt{\hat v_t}}

    With `decay=True` the step is also divided by :math:`\sqrt{t}` (RETURNN's
    `learning_rate /= sqrt(t)`). RETURNN has no sparse rule (TF densifies the gradient),
    so row-sparse gradients are densified. With RETURNN's default `eps = 0` a parameter
    whose gradient has always been 0 gets 0/0: pass a small `eps` to avoid it.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root, >= 0.
      decay: divide by the square root of the step number.

    Returns:
      A `GradientTransformation` with state `ScaleByAmsgradState(count, m, v, v_hat)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_amsgrad(b1=0.5, b2=0.75)
        >>> u, _ = tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))
        >>> float(u[0])  # m = 1, v = 1: 1 / sqrt(1)
        1.0

    References:
      Reddi, Kale, Kumar, *On the convergence of Adam and beyond*, ICLR 2018.
    """
    fn = "scale_by_amsgrad"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "decay", decay)

    return update_rule(
        fn,
        ScaleByAmsgradState,
        functools.partial(_amsgrad_leaf, decay=decay),
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": 0.0, "v": SQUARES, "v_hat": SQUARES},
        prepare=_sqrt_step if decay else None,
        sparse="densify",  # RETURNN has no sparse rule: TF densifies the gradient
        tf_scalars=True,
    )


class ScaleByBiasCorrectedAmsgradState(NamedTuple):
    """State of `scale_by_bias_corrected_amsgrad`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # second moment (starts at 0)
    nu_max: _protocol.Updates  # the running maximum of the (corrected) second moment (starts at 0)


def _bias_corrected_amsgrad_leaf(g, m, v, v_max, h, *, correct_m: bool, correct_v: bool):
    m = _formulas.optax_moment(m, g, h.b1)
    v = _formulas.optax_moment(v, squared_as(g, v), h.b2)
    v_max = jnp.maximum(v_max, v / h.bc2 if correct_v else v)
    return (m / h.bc1 if correct_m else m) / (jnp.sqrt(v_max + h.eps_root) + h.eps), m, v, v_max


@_registry.transform()
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
      mu_dtype: dtype of `mu` (default: each param's dtype).
      nu_dtype: dtype of `nu` and `nu_max` (default: each param's dtype).
      bias_correction_mu: divide the first moment by :math:`1-\beta_1^t`.
      bias_correction_nu: divide the second moment by :math:`1-\beta_2^t` before the maximum.

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedAmsgradState(count, mu, nu, nu_max)`.

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
        functools.partial(
            _bias_corrected_amsgrad_leaf, correct_m=bias_correction_mu, correct_v=bias_correction_nu
        ),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={
            "mu": Slot(0.0, mu_dtype),
            "nu": Slot(0.0, nu_dtype, True),
            "nu_max": Slot(0.0, nu_dtype, True),
        },
        prepare=corrections,
    )


@_registry.optimizer("AMSGrad")
def amsgrad(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 0.0,
    *,
    decay: bool = False,
) -> _protocol.GradientTransformation:
    r"""AMSGrad: RETURNN's `AMSGradOptimizer` (no bias correction), not `optax.amsgrad` (`optax_compat`'s).

    This is `chain(scale_by_amsgrad(b1, b2, eps, decay=decay), scale_by_learning_rate(learning_rate))`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root, >= 0 (RETURNN's default 0).
      decay: divide the rate by the square root of the step number (RETURNN's `decay`).

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `m`, `v`
      and `v_hat`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.amsgrad(0.1, b1=0.5, b2=0.75)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]
        Array([-0.1], dtype=float32)
    """
    return chain(scale_by_amsgrad(b1, b2, eps, decay=decay), scale_by_learning_rate(learning_rate))


__all__ = [
    "ScaleByAmsgradState",
    "ScaleByBiasCorrectedAmsgradState",
    "amsgrad",
    "scale_by_amsgrad",
    "scale_by_bias_corrected_amsgrad",
]
