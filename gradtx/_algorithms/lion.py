"""Lion: optax's (`scale_by_lion`, `lion`), RETURNN's torch rule, and Tiger (Lion with one beta)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.restated import restated
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights, torch_weight_decay


class ScaleByLionState(NamedTuple):
    """State of `scale_by_lion`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the momentum: a moving average of the gradients with decay b2 (starts at 0)


_LION_MODES = {
    "hard": lambda x, h: jnp.sign(x),
    "smooth": lambda x, h: jnp.tanh(h.smooth_beta * x),
    "refined": lambda x, h: jnp.where(jnp.abs(x) < 1, x, jnp.sign(x)),
}
"""How Lion turns the blend `x` into a direction: its sign, `tanh(smooth_beta x)`, or `x` clipped to
the sign where `|x| >= 1` (optax's `mode`s)."""


def _lion_leaf(g, m, h, *, mode):
    """`(direction(b1 m + (1 - b1) g), b2 m + (1 - b2) g)`, in the wider of the two dtypes (a bfloat16 `m`
    of float32 params: in float32)."""
    wide = jnp.promote_types(g.dtype, m.dtype)
    g, m = g.astype(wide), m.astype(wide)
    return _LION_MODES[mode](_formulas.optax_moment(m, g, h.b1), h), _formulas.optax_moment(m, g, h.b2)


@_registry.transform()
def scale_by_lion(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    *,
    mu_dtype: Any = None,
    mode: str = "hard",
    smooth_beta: _protocol.ScalarOrSchedule = 1.0,
) -> _protocol.GradientTransformation:
    r"""Lion's direction: the sign of a blend of the momentum and the gradient, then the momentum moves on.

    .. math::
        u_t = \operatorname{sign}\big(\beta_1 m_{t-1} + (1-\beta_1) g_t\big), \qquad
        m_t = \beta_2 m_{t-1} + (1-\beta_2) g_t

    The update interpolates with :math:`\beta_1` and the momentum is kept with
    :math:`\beta_2 > \beta_1`, so the step looks further back than it updates. Every
    element moves by the learning rate exactly: Lion's rate is typically 3-10x smaller than
    AdamW's and its weight decay 3-10x larger. These are the numbers of
    `optax.scale_by_lion`, whose other `mode`s replace the sign by
    :math:`\tanh(\beta_s x)` (`"smooth"`) or by :math:`x` where :math:`|x| < 1` (`"refined"`).
    A row-sparse gradient is densified first (the momentum of every row decays). A gradient
    of +-inf leaves `mu` infinite for good and the update at +-1 whatever the later
    gradients (NaN makes the update NaN); wrap in `apply_if_finite` to skip such steps.

    Args:
      b1: the weight of the momentum in the update's direction, in [0, 1].
      b2: decay of the momentum `mu`, in [0, 1].
      mu_dtype: dtype of `mu` (default: each param's dtype).
      mode: `"hard"` (the sign), `"smooth"` or `"refined"` (see above).
      smooth_beta: :math:`\beta_s` of `mode="smooth"`, > 0.

    Returns:
      An `ElementWise` transform with state `ScaleByLionState(count, mu)`.

    Raises:
      ValueError: if `b1` or `b2` is outside [0, 1], for an unknown `mode` or a non-positive
        `smooth_beta`.
      TypeError: for a `mu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_lion()
        >>> u, state = tx.update(jnp.array([0.02, -3.0]), tx.init(jnp.zeros(2)))
        >>> u, state.mu.round(6)  # sign(0.1 g); m = 0.01 g
        (Array([ 1., -1.], dtype=float32), Array([ 0.0002, -0.03  ], dtype=float32))

    References:
      Chen et al., *Symbolic discovery of optimization algorithms*, NeurIPS 2023
      (Algorithm 2, Lion).
    """
    fn = "scale_by_lion"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_one_of(fn, "mode", mode, tuple(_LION_MODES))
    _checks.check_positive(fn, "smooth_beta", smooth_beta)

    return update_rule(
        fn,
        ScaleByLionState,
        functools.partial(_lion_leaf, mode=mode),
        hyper={"b1": b1, "b2": b2, **({"smooth_beta": smooth_beta} if mode == "smooth" else {})},
        slots={"mu": Slot(0.0, mu_dtype)},
    )


@_registry.optimizer("Lion")
def lion(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    weight_decay: _protocol.ScalarOrSchedule = 1e-3,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Lion: every element moves by the learning rate, along the sign of an interpolated momentum.

    `chain(scale_by_lion(b1, b2, mu_dtype=mu_dtype), add_decayed_weights(weight_decay,
    mask=mask), scale_by_learning_rate(learning_rate))`: the numbers and defaults of
    `optax.lion`. Its only slot is the momentum `m`. Take a rate 3-10x smaller than AdamW's
    and a weight decay 3-10x larger. A row-sparse gradient is densified. A gradient of
    +-inf leaves `m` infinite for good: the params stay finite but that element moves by the
    rate in one direction whatever the later gradients (NaN reaches the params); wrap in
    `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: the weight of the momentum in the update's direction, in [0, 1].
      b2: decay of the momentum, in [0, 1].
      weight_decay: added to the sign as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the momentum `m` (default: each param's dtype).

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slot is `m`.

    Raises:
      ValueError: for a beta outside [0, 1], or a negative weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lion(0.1, weight_decay=0.0)
        >>> params = jnp.zeros(3)
        >>> tx.update(jnp.array([0.5, -1e-3, 0.0]), tx.init(params), params)[0]  # -lr sign(g)
        Array([-0.1,  0.1, -0. ], dtype=float32)

    References:
      Chen et al., *Symbolic discovery of optimization algorithms*, NeurIPS 2023.
    """
    return chain(
        scale_by_lion(b1, b2, mu_dtype=mu_dtype),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.Tiger",
        {
            "lr": "learning_rate",
            "beta": "beta",
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "fixed_decay": "fixed_decay",
        },
        defaults={"lr": 1e-3},
        fixed={"maximize": False},
    )
)
def tiger(
    learning_rate: _protocol.ScalarOrSchedule,
    beta: _protocol.ScalarOrSchedule = 0.965,
    weight_decay: _protocol.ScalarOrSchedule = 0.01,
    *,
    weight_decouple: bool = True,
    fixed_decay: bool = False,
    mask: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Tiger: the sign of a momentum, the momentum updated first (Lion with :math:`\beta_1 = \beta_2`).

    .. math::
        m_t = \beta m_{t-1} + (1-\beta) g_t, \qquad
        w_t = w_{t-1} - \eta\,(\operatorname{sign}(m_t) + \lambda w_{t-1})

    `scale_by_lion(beta, beta)` with pytorch-optimizer's weight decay: the numbers of its `Tiger`
    (`gradtx.get("Tiger", lr=..., beta=...)` takes its arguments and defaults). The decay is
    decoupled and scaled by the rate by default; `fixed_decay` drops the rate from it and
    `weight_decouple=False` adds :math:`\lambda w` to the gradient before the momentum
    (`torch_weight_decay`). Its one slot is the momentum `mu`. A gradient of +-inf leaves
    `mu` infinite for good (the step at +-rate whatever the later gradients).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      beta: decay of the momentum, in [0, 1].
      weight_decay: :math:`\lambda`, >= 0.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      fixed_decay: with `weight_decouple`, decay by :math:`\lambda` instead of :math:`\eta\lambda`.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the momentum (default: each param's dtype).

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slot is `mu`.

    Raises:
      ValueError: for `beta` outside [0, 1], a negative weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.tiger(0.1, weight_decay=0.0)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([0.5, -1e-3]), tx.init(params), params)[0]  # -lr sign(g)
        Array([-0.1,  0.1], dtype=float32)

    References:
      Su, *Tiger: a tight-fisted optimizer* (2023), https://github.com/bojone/tiger;
      pytorch-optimizer's `Tiger` (the reference of the tests).
    """
    _checks.check_in_range("tiger", "beta", beta, 0.0, 1.0)
    return torch_weight_decay(
        scale_by_lion(beta, beta, mu_dtype=mu_dtype),
        learning_rate,
        weight_decay,
        decouple=weight_decouple,
        fixed=fixed_decay,
        mask=mask,
    )


class TorchLionState(NamedTuple):
    """State of RETURNN's Lion (`scale_by_lion` under its names)."""

    count: _protocol.Count  # int32: completed updates (Lion keeps no step)
    exp_avg: _protocol.Updates  # the momentum (starts at 0)


def lion_rule(b1: float, b2: float) -> _protocol.GradientTransformation:
    """RETURNN's Lion direction: `scale_by_lion` (the sign of the blend) as RETURNN names it."""
    return restated(scale_by_lion(b1, b2), TorchLionState, {"mu": "exp_avg"})


__all__ = ["ScaleByLionState", "lion", "scale_by_lion", "tiger"]
