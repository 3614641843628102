"""Adan (optax's numbers): `scale_by_adan`, `adan`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import correction, corrections
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByAdanState(NamedTuple):
    """State of `scale_by_adan`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # moving average of the gradients (starts at 0)
    v: _protocol.Updates  # moving average of the gradient differences g_t - g_{t-1} (starts at 0)
    n: _protocol.Updates  # moving average of (g_t + b2' (g_t - g_{t-1}))^2 (starts at 0)
    g: _protocol.Updates  # the previous step's gradient g_{t-1} (starts at 0)


def _adan_prepare(h, state, extra_args):
    """The three bias corrections, and whether this is the first step (no gradient difference yet)."""
    out = corrections(h, state, extra_args)
    out["bc3"] = correction(h.b3, h.t)
    out["first"] = h.count == 0
    return out


def _adan_leaf(g, m, v, n, prev, h):
    diff = jnp.where(h.first, jnp.zeros_like(g), g - prev.astype(g.dtype))
    m = _formulas.optax_moment(m, g, h.b1)
    v = _formulas.optax_moment(v, diff, h.b2)
    n = _formulas.optax_moment(n, _formulas.abs_sq(g + (1 - h.b2) * diff), h.b3)
    direction = m / h.bc1 + (1 - h.b2) * (v / h.bc2)
    return direction / (jnp.sqrt(n / h.bc3 + h.eps_root) + h.eps), m, v, n, g


@_registry.transform()
def scale_by_adan(
    b1: _protocol.ScalarOrSchedule = 0.98,
    b2: _protocol.ScalarOrSchedule = 0.92,
    b3: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Adan's scaling: the gradients' momentum plus their differences', over a Nesterov second moment.

    With :math:`\Delta_t = g_t - g_{t-1}` (:math:`\Delta_1 = 0`) and each average
    bias-corrected (:math:`\hat x_t = x_t / (1-\beta^t)` with its own :math:`\beta`):

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) \Delta_t, \\
        n_t = \beta_3 n_{t-1} + (1-\beta_3) \big(g_t + (1-\beta_2)\Delta_t\big)^2, \quad
        u_t = \frac{\hat m_t + (1-\beta_2)\hat v_t}{\sqrt{\hat n_t + \epsilon_{root}} + \epsilon}

    The difference term extrapolates the gradient (Nesterov's look-ahead) without a second
    gradient evaluation. The betas are decays (the paper's :math:`1-\beta`: its 0.02, 0.08,
    0.01 are these 0.98, 0.92, 0.99). These are the numbers of `optax.scale_by_adan`
    (bias-corrected, as the paper's official code). The previous gradient is a slot, so the
    state is four copies of the params. A row-sparse gradient is densified first.

    Args:
      b1: decay of the gradients' average, in [0, 1).
      b2: decay of the differences' average, in [0, 1).
      b3: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByAdanState(count, m, v, n, g)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adan(eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # step 1: sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Xie, Zhou, Li, Lin, Yan, *Adan: adaptive Nesterov momentum algorithm for faster
      optimizing deep models*, IEEE TPAMI 2024 (arXiv:2208.06677, Algorithm 1).
    """
    fn = "scale_by_adan"
    for name, value in (("b1", b1), ("b2", b2), ("b3", b3)):
        _checks.check_in_range(fn, name, value, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps_root", eps_root)

    return update_rule(
        fn,
        ScaleByAdanState,
        _adan_leaf,
        hyper={"b1": b1, "b2": b2, "b3": b3, "eps": eps, "eps_root": eps_root},
        slots={"m": 0.0, "v": 0.0, "n": SQUARES, "g": 0.0},
        prepare=_adan_prepare,
    )


@_registry.optimizer("Adan")
def adan(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.98,
    b2: _protocol.ScalarOrSchedule = 0.92,
    b3: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adan: adaptive Nesterov momentum from the gradients and their differences, with weight decay.

    `chain(scale_by_adan(b1, b2, b3, eps, eps_root), add_decayed_weights(weight_decay,
    mask=mask), scale_by_learning_rate(learning_rate))`: the numbers and defaults of
    `optax.adan` (its decay is decoupled and multiplied by the rate, not the paper's
    proximal form). The state is four copies of the params. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the gradients' average, in [0, 1).
      b2: decay of the differences' average, in [0, 1).
      b3: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m`, `v`, `n` and `g`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adan(0.1, eps_root=0.0, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr sign(g)
        [-0.1, 0.1]

    References:
      Xie, Zhou, Li, Lin, Yan, *Adan: adaptive Nesterov momentum algorithm for faster
      optimizing deep models*, IEEE TPAMI 2024 (arXiv:2208.06677).
    """
    return chain(
        scale_by_adan(b1, b2, b3, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByAdanState", "adan", "scale_by_adan"]
