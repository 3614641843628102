"""Adam's relatives that keep a maximum: `scale_by_adamax` (contrib's AdaMax, an infinity norm) and
`scale_by_amsgrad` (RETURNN's AMSGrad, a running maximum of the second moment)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core.rule import update_rule


class ScaleByAdamaxState(NamedTuple):
    """State of `scale_by_adamax`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": first moment (starts at 0)
    v: _protocol.Updates  # TF slot "v": exponentially weighted infinity norm (starts at 0)
    beta1_power: jax.Array  # TF's non-slot "beta1_power": b1**(count+1), a running product


def _adamax_power(h, state, extra_args):
    """TF's running `beta1_power`: the bias correction `1 / (1 - b1^t)`, and the next product."""
    del extra_args
    return {"c": 1 / (1 - state.beta1_power), "beta1_power": state.beta1_power * h.b1}


def _adamax_leaf(g, m, v, h):
    """ApplyAdaMax: `m += (g - m)(1 - b1)`, `v = max(b2 v, |g|)`, the step `m / (v + eps) * c`."""
    m = _formulas.moment_increment(m, g, h.b1)
    v = jnp.maximum(h.b2 * v, jnp.abs(g))
    return (m / (v + h.eps)) * h.c, m, v


def _adamax_row_rule(g, m, v, h):
    """contrib's sparse rule on the touched rows: `m = m b1 + g (1 - b1)`, `v = max(v b2, |g|)`."""
    m = _formulas.moment_blend(m, g, h.b1)
    v = jnp.maximum(v * h.b2, jnp.abs(g))
    return (m / (v + h.eps)) * h.c, m, v


def _adamax_rows(g, m, v, h):
    """contrib's AdaMax on a row-sparse gradient: the touched rows of `m`, `v` and the variable only."""
    return sparse.apply_rows(functools.partial(_adamax_row_rule, h=h), g, m, v)


@_factory.api
def scale_by_adamax(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""AdaMax's scaling as contrib's `ApplyAdaMax`, not `optax.scale_by_adamax` (`optax_compat`'s).

    .. math::
        m_t = m_{t-1} + (g_t - m_{t-1})(1-\beta_1), \quad
        v_t = \max(\beta_2 v_{t-1}, |g_t|), \quad
        u_t = \frac{1}{1-\beta_1^t}\,\frac{m_t}{v_t + \epsilon}

    Followed by `scale_by_learning_rate(lr)` this is `tf.contrib.opt.AdaMaxOptimizer`.
    Only `beta1_power` is kept (a float32 running product, as TF). Row-sparse gradients
    change the touched rows only (contrib's Python rule, with
    `m = m*b1 + g*(1-b1)` on those rows).

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to the norm, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByAdamaxState(count, m, v, beta1_power)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adamax(eps=0.0)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 5) for x in u]  # m = 0.1 g, v = |g|, / (1 - 0.9)
        [1.0, -1.0]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015, section 7.1.
    """
    fn = "scale_by_adamax"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)

    return update_rule(
        fn,
        ScaleByAdamaxState,
        _adamax_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": 0.0, "v": 0.0},
        scalars={"beta1_power": lambda h: h.b1},
        prepare=_adamax_power,
        sparse=_adamax_rows,
        tf_scalars=True,  # TF's scalars: a float32 beta1_power for float32 params, with or without x64
    )


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


@_factory.api
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
        slots={"m": 0.0, "v": 0.0, "v_hat": 0.0},
        prepare=_sqrt_step if decay else None,
        sparse="densify",  # RETURNN has no sparse rule: TF densifies the gradient
        tf_scalars=True,
    )
