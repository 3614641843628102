"""ADOPT (optax's numbers): `scale_by_adopt`, `adopt`."""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import SQUARES, Slot, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByAdoptState(NamedTuple):
    """State of `scale_by_adopt`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment of the normalised gradients (starts at 0)
    nu: _protocol.Updates  # second moment of the gradients (starts at 0; g_1^2 after step 1)


def adopt_clip_value(count):
    """ADOPT's default clipping bound at step `count + 1`: `count ** 0.25` (0 at the first step)."""
    return count**0.25


def _adopt_prepare(h, state, extra_args, *, clip_value_fn):
    """The decays of step `t` (the first step only sets `v = g^2`; `m` stays 0) and the clipping bound."""
    del state, extra_args
    first = h.count == 0
    out = {"b1_t": jnp.where(first, 1, h.b1), "b2_t": jnp.where(first, 0, h.b2)}
    if clip_value_fn is not None:
        out["clip"] = clip_value_fn(h.count)
    return out


def _adopt_leaf(g, m, v, h, *, nesterov: bool, clipping: bool):
    normalised = g / jnp.maximum(jnp.sqrt(v), h.eps)  # by the second moment before g
    if clipping:
        normalised = jnp.clip(normalised, -h.clip, h.clip)
    v = _formulas.optax_moment(v, _formulas.abs_sq(g), h.b2_t)
    m = _formulas.optax_moment(m, normalised, h.b1_t)
    return (_formulas.optax_moment(m, normalised, h.b1_t) if nesterov else m), m, v


@_registry.transform()
def scale_by_adopt(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.9999,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    *,
    mu_dtype: Any = None,
    nesterov: bool = False,
    use_clipping: bool = True,
    clip_value_fn: Callable[[Any], Any] = adopt_clip_value,
) -> _protocol.GradientTransformation:
    r"""ADOPT's scaling: the momentum of gradients normalised by the second moment of the previous ones.

    .. math::
        \tilde g_t = \operatorname{clip}\Big(\frac{g_t}{\max(\sqrt{v_{t-1}}, \epsilon)}, c_t\Big), \quad
        m_t = \beta_1 m_{t-1} + (1-\beta_1) \tilde g_t, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \qquad u_t = m_t

    The first step only initialises :math:`v_1 = g_1^2` (its update is 0). Because
    :math:`v_{t-1}` does not contain :math:`g_t`, ADOPT converges for any :math:`\beta_2`.
    With `use_clipping`, :math:`\tilde g_t` is clipped to :math:`[-c_t, c_t]` with
    :math:`c_t` = `clip_value_fn(t - 1)` (default :math:`(t-1)^{1/4}`, the paper's stable
    variant). With `nesterov`, the update is :math:`\beta_1 m_t + (1-\beta_1) \tilde g_t`.
    These are the numbers and defaults of `optax.contrib.scale_by_adopt`. A row-sparse
    gradient is densified first; with clipping, complex parameters are refused (optax's
    clip fails on them).

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: the smallest denominator, >= 0.
      mu_dtype: dtype of `mu` (default: each param's dtype).
      nesterov: step along Nesterov's look-ahead of the momentum.
      use_clipping: clip the normalised gradient to `clip_value_fn(count)`.
      clip_value_fn: the clipping bound as a function of the completed steps (int32 array).

    Returns:
      An `ElementWise` transform with state `ScaleByAdoptState(count, mu, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` is negative.
      TypeError: for a non-bool `nesterov` / `use_clipping`, a non-callable `clip_value_fn`, or a
        `mu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adopt(use_clipping=False)
        >>> params, g = jnp.zeros(2), jnp.array([2.0, -0.5])
        >>> u, state = tx.update(g, tx.init(params))
        >>> u, state.nu  # step 1 only sets v
        (Array([0., 0.], dtype=float32), Array([4.  , 0.25], dtype=float32))
        >>> [round(float(x), 4) for x in tx.update(g, state)[0]]  # (1 - b1) g / |g|
        [0.1, -0.1]

    References:
      Taniguchi, Harada, Minegishi, Oshima, Jeong, Nagahara, Iiyama, Suzuki, Iwasawa, Matsuo,
      *ADOPT: modified Adam can converge with any beta2 with the optimal rate*, NeurIPS 2024
      (arXiv:2411.02853), Algorithm 2.
    """
    fn = "scale_by_adopt"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_bool(fn, "nesterov", nesterov)
    _checks.check_bool(fn, "use_clipping", use_clipping)
    _checks.check_callable(fn, "clip_value_fn", clip_value_fn)

    return update_rule(
        fn,
        ScaleByAdoptState,
        functools.partial(_adopt_leaf, nesterov=nesterov, clipping=use_clipping),
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"mu": Slot(0.0, mu_dtype), "nu": SQUARES},
        prepare=functools.partial(_adopt_prepare, clip_value_fn=clip_value_fn if use_clipping else None),
        real_only="it clips the normalised gradient (complex numbers have no order)"
        if use_clipping
        else None,
    )


@_registry.optimizer("ADOPT")
def adopt(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.9999,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    *,
    mu_dtype: Any = None,
    nesterov: bool = False,
    use_clipping: bool = True,
    clip_value_fn: Callable[[Any], Any] = adopt_clip_value,
) -> _protocol.GradientTransformation:
    r"""ADOPT: Adam whose gradient is normalised by the second moment of the gradients before it.

    `chain(scale_by_adopt(b1, b2, eps, mu_dtype=mu_dtype, nesterov=nesterov,
    use_clipping=use_clipping, clip_value_fn=clip_value_fn), scale_by_learning_rate(learning_rate))`:
    the numbers and defaults of `optax.contrib.adopt`. The first step moves nothing (it sets
    the second moment); with clipping (the default) the normalised gradient is bounded by
    :math:`(t-1)^{1/4}`. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: the smallest denominator, >= 0.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype).
      nesterov: step along Nesterov's look-ahead of the momentum.
      use_clipping: clip the normalised gradient to `clip_value_fn(count)`.
      clip_value_fn: the clipping bound as a function of the completed steps.

    Returns:
      An `ElementWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adopt(0.1, use_clipping=False)
        >>> params, g = jnp.zeros(2), jnp.array([2.0, -0.5])
        >>> u, state = tx.update(g, tx.init(params), params)
        >>> [round(float(x), 4) for x in tx.update(g, state, params)[0]]  # step 2: -lr (1 - b1) sign(g)
        [-0.01, 0.01]

    References:
      Taniguchi et al., *ADOPT: modified Adam can converge with any beta2 with the optimal
      rate*, NeurIPS 2024 (arXiv:2411.02853).
    """
    return chain(
        scale_by_adopt(
            b1,
            b2,
            eps,
            mu_dtype=mu_dtype,
            nesterov=nesterov,
            use_clipping=use_clipping,
            clip_value_fn=clip_value_fn,
        ),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByAdoptState", "adopt", "scale_by_adopt"]
