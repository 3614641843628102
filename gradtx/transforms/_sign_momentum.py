"""Steps along the sign of a direction: `scale_by_sign` (signSGD; after `ema`, Signum), `scale_by_lion`.

Every element moves by the same amount, only its direction comes from the gradient (or
from a momentum of it), so the step size is set by the learning rate alone.
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


class ScaleByLionState(NamedTuple):
    """State of `scale_by_lion`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # the momentum: a moving average of the gradients with decay b2 (starts at 0)


def _sign_leaf(g, h):
    del h
    return (jnp.sign(g),)


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
    return _LION_MODES[mode](_formulas.moment_blend(m, g, h.b1), h), _formulas.moment_blend(m, g, h.b2)


@_factory.api
def scale_by_sign() -> _protocol.GradientTransformation:
    r"""Replace every update by its sign: each element moves by one unit, up, down or not at all.

    .. math:: u_t = \operatorname{sign}(g_t)

    Followed by the learning rate this is signSGD (`optax.sign_sgd`); after `ema(beta)` it
    is Signum (the sign of the momentum, `optax.signum`). A row-sparse gradient keeps its
    rows: their duplicates are summed, then the sign is taken (the untouched rows' sign is
    0, so this is also the dense rule). An update of +-inf becomes +-1, NaN stays NaN; wrap
    in `apply_if_finite` to skip such steps.

    Args:
      (none)

    Returns:
      An `ElementWise` transform with state `EmptyState()`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_sign()
        >>> tx.update(jnp.array([0.3, -2.0, 0.0]), tx.init(jnp.zeros(3)))[0]
        Array([ 1., -1.,  0.], dtype=float32)

    References:
      Bernstein, Wang, Azizzadenesheli, Anandkumar, *signSGD: compressed optimisation for
      non-convex problems*, ICML 2018 (Algorithms 1 and 3).
    """
    return update_rule("scale_by_sign", _protocol.EmptyState, _sign_leaf, sparse="rows", count="if_scheduled")


@_factory.api
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
    of +-inf leaves `m` infinite for good and the update at +-1 whatever the later
    gradients (NaN makes the update NaN); wrap in `apply_if_finite` to skip such steps.

    Args:
      b1: the weight of the momentum in the update's direction, in [0, 1].
      b2: decay of the momentum `m`, in [0, 1].
      mu_dtype: dtype of `m` (default: each param's dtype).
      mode: `"hard"` (the sign), `"smooth"` or `"refined"` (see above).
      smooth_beta: :math:`\beta_s` of `mode="smooth"`, > 0.

    Returns:
      An `ElementWise` transform with state `ScaleByLionState(count, m)`.

    Raises:
      ValueError: if `b1` or `b2` is outside [0, 1], for an unknown `mode` or a non-positive
        `smooth_beta`.
      TypeError: for a `mu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_lion()
        >>> u, state = tx.update(jnp.array([0.02, -3.0]), tx.init(jnp.zeros(2)))
        >>> u, state.m.round(6)  # sign(0.1 g); m = 0.01 g
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
        slots={"m": Slot(0.0, mu_dtype)},
    )
