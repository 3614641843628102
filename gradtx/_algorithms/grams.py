"""Grams (Cao et al. 2024): Adam's magnitudes with the gradient's signs, pytorch-optimizer's `Grams`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.chain import chain
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import torch_weight_decay


class ScaleByGramsState(NamedTuple):
    """State of `scale_by_grams` (pytorch-optimizer's names)."""

    count: _protocol.Count  # int32: completed updates (the reference's `step`)
    exp_avg: _protocol.Updates  # the first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # the second moment (starts at 0)


def _grams_leaf(g, exp_avg, exp_avg_sq, h):
    """`|m_hat / (sqrt(v) / sqrt(1 - b2^t) + eps)| sign(g)`, the moments as torch updates them."""
    wide = _scalars.at_least_float32(g.dtype)
    x = g.astype(wide)
    m = _formulas.moment_increment(exp_avg.astype(wide), x, h.b1)  # torch's lerp
    v = _formulas.moment_blend(exp_avg_sq.astype(wide), x * x, h.b2)
    den = jnp.sqrt(v) / jnp.sqrt(_formulas.torch_debias(h.b2, h.t, wide)) + h.eps
    u = (m / _formulas.torch_debias(h.b1, h.t, wide)) / den
    return (jnp.abs(u) * jnp.sign(x)).astype(g.dtype), m, v


@_registry.transform()
def scale_by_grams(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-6,
) -> _protocol.GradientTransformation:
    r"""Grams' direction: the magnitude of Adam's step, the sign of the current gradient.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \quad
        u_t = \operatorname{sign}(g_t) \odot \left|\frac{m_t / (1-\beta_1^t)}
        {\sqrt{v_t} / \sqrt{1-\beta_2^t} + \epsilon}\right|

    Adam's momentum sets how far each element moves and the gradient which way, so the step
    never opposes the current gradient (an element with :math:`g = 0` does not move). These are the
    numbers of pytorch-optimizer's `Grams` (torch's Adam denominator, the corrections in double
    precision); the moments are computed in float32 at least. A row-sparse gradient is densified.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the corrected root of the second moment, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByGramsState(count, exp_avg, exp_avg_sq)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative `eps`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_grams(eps=0.0)
        >>> state = tx.init(jnp.zeros(2))
        >>> _, state = tx.update(jnp.array([2.0, -1.0]), state)
        >>> tx.update(jnp.array([-0.1, -1.0]), state)[0].round(3)  # the momentum's size, the gradient's sign
        Array([-0.632, -1.   ], dtype=float32)

    References:
      Cao, Wang, Zhang, Liu, Li, *Grams: gradient descent with adaptive momentum scaling* (2024),
      arXiv:2412.17107; pytorch-optimizer's `Grams`.
    """
    fn = "scale_by_grams"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    return update_rule(
        fn,
        ScaleByGramsState,
        _grams_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES},
        real_only=_REAL_ONLY,
        compute_dtype=_scalars.at_least_float32,
    )


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.Grams",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "eps": "eps",
        },
        defaults={"lr": 1e-3, "betas": (0.9, 0.999)},
        fixed={"maximize": False},
    )
)
def grams(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    *,
    weight_decouple: bool = True,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Grams: Adam's step sizes along the current gradient's signs, with decoupled weight decay.

    `torch_weight_decay(scale_by_grams(b1, b2, eps), learning_rate, weight_decay)`:
    :math:`w_t = w_{t-1}(1 - \eta\lambda) - \eta u_t`, the numbers and defaults of pytorch-optimizer's
    `Grams` (`gradtx.get("Grams", lr=..., betas=...)` takes its arguments). With
    `weight_decouple=False` the reference adds :math:`\lambda w` to the gradient after the step has
    read it, so it decays nothing; gradtx does the same (`chain(scale_by_grams(...),
    scale_by_learning_rate(learning_rate))`). Its slots are `exp_avg` and `exp_avg_sq`. A row-sparse
    gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      weight_decay: :math:`\lambda`, >= 0.
      eps: added to the corrected root of the second moment, >= 0.
      weight_decouple: decay the weights directly (True), or (as the reference) not at all (False).
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `exp_avg` and `exp_avg_sq`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.grams(0.1, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0].round(6)  # -lr sign(g) at step 1
        Array([-0.1,  0.1], dtype=float32)

    References:
      Cao, Wang, Zhang, Liu, Li, *Grams: gradient descent with adaptive momentum scaling* (2024),
      arXiv:2412.17107; pytorch-optimizer's `Grams` (the reference of the tests).
    """
    fn = "grams"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_bool(fn, "weight_decouple", weight_decouple)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    rule = scale_by_grams(b1, b2, eps)
    if not weight_decouple:
        return chain(rule, scale_by_learning_rate(learning_rate))
    return torch_weight_decay(rule, learning_rate, weight_decay, mask=mask)


__all__ = ["ScaleByGramsState", "grams", "scale_by_grams"]
