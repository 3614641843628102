"""ACProp (optax's numbers): `scale_by_acprop`, `acprop`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import correction
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByAcpropState(NamedTuple):
    """State of `scale_by_acprop`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # the moving average of (g - m_prev)^2, plus eps_root per step (starts at 0)


def _acprop_prepare(h, state, extra_args):
    """Whether this is the first step, and the correction of the second statistic before it (of step `t - 1`;
    1 at the first step)."""
    del state, extra_args
    first = h.count == 0
    return {"first": first, "bc2_prev": correction(h.b2, jnp.where(first, 1, h.count))}


def _acprop_leaf(g, m, s, h):
    s_hat = jnp.where(h.first, 1, s / h.bc2_prev)  # the statistic before g (1 at the first step)
    update = g / (jnp.sqrt(s_hat) + h.eps)
    s_new = _formulas.optax_moment(s, _formulas.abs_sq(g - m), h.b2) + h.eps_root  # centred on the previous m
    return update, _formulas.optax_moment(m, g, h.b1), s_new


@_registry.transform()
def scale_by_acprop(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    eps_root: _protocol.ScalarOrSchedule = 1e-16,
) -> _protocol.GradientTransformation:
    r"""ACProp's scaling: the gradient over the root of AdaBelief's statistic before it (asynchronous).

    .. math::
        u_t = \frac{g_t}{\sqrt{s_{t-1} / (1-\beta_2^{t-1})} + \epsilon} \;(u_1 = g_1 / (1 + \epsilon)), \\
        s_t = \beta_2 s_{t-1} + (1-\beta_2)(g_t - m_{t-1})^2 + \epsilon_{root}, \quad
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t

    The numerator is the gradient itself (no momentum: the momentum only centres the
    statistic) and the denominator comes from the steps before it. These are the numbers
    and defaults of `optax.contrib.scale_by_acprop`, which centres on the previous momentum
    :math:`m_{t-1}` (the authors' code; the paper writes :math:`m_t`). A row-sparse gradient
    is densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByAcpropState(count, mu, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_acprop(eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]  # step 1: g
        Array([ 2. , -0.5], dtype=float32)

    References:
      Zhuang, Ding, Tang, Dvornek, Tatikonda, Duncan, *Momentum centering and asynchronous
      update for adaptive gradient methods*, NeurIPS 2021 (arXiv:2110.05454).
    """
    fn = "scale_by_acprop"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    for name, value in (("eps", eps), ("eps_root", eps_root)):
        _checks.check_finite(fn, name, value)
        _checks.check_nonnegative(fn, name, value)

    return update_rule(
        fn,
        ScaleByAcpropState,
        _acprop_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"mu": 0.0, "nu": SQUARES},
        prepare=_acprop_prepare,
    )


@_registry.optimizer("ACProp")
def acprop(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    eps_root: _protocol.ScalarOrSchedule = 1e-16,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""ACProp: the gradient over the root of AdaBelief's statistic of the gradients before it.

    `chain(scale_by_acprop(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask=mask),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.contrib.acprop`.
    The first step is `-learning_rate * g / (1 + eps)`. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment (which centres the statistic), in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `s`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.acprop(0.1)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr g
        [-0.2, 0.05]

    References:
      Zhuang et al., *Momentum centering and asynchronous update for adaptive gradient
      methods*, NeurIPS 2021 (arXiv:2110.05454).
    """
    return chain(
        scale_by_acprop(b1, b2, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByAcpropState", "acprop", "scale_by_acprop"]
