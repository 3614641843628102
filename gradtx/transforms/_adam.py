"""TF1's Adam and its contrib variants, one building block each, sharing one formula.

`scale_by_adam` (TF1's ApplyAdam, epsilon-hat), `scale_by_nesterov_adam` (contrib's Nadam
kernel), `scale_by_lazy_adam` (contrib's LazyAdam: row-sparse gradients change their rows
only); `_adam_gs.py` adds the two whose bias correction comes from TF's global step. They
differ in two places only: where the bias correction's beta powers come from (`_powers_*`),
and how a leaf is updated (`_*_leaf`, dense and row-sparse).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core.rule import Slot, update_rule
from gradtx.transforms._bias_corrected_adam import squared_as


class ScaleByAdamState(NamedTuple):
    """State of the Adam building blocks (TF's slots and non-slot variables)."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": first moment (starts at 0)
    v: _protocol.Updates  # TF slot "v": second moment (starts at 0)
    beta1_power: jax.Array  # TF's non-slot "beta1_power": b1**(count+1), float32 (float64 for f64 params)
    beta2_power: jax.Array  # TF's non-slot "beta2_power": b2**(count+1), likewise


# --------------------------------------------------------------------------- the one formula


def _adam_step(num, v, h):
    """The epsilon-hat step: `num * c / (sqrt(v) + eps)`, with `num` the first moment (or Nesterov's)."""
    if num.dtype == v.dtype == getattr(h.c, "dtype", None) == getattr(h.eps, "dtype", None):
        return lax.div(lax.mul(num, h.c), lax.add(lax.sqrt(v), h.eps))  # as below, without jnp's wrappers
    return (num * h.c) / (jnp.sqrt(v) + h.eps)


def _nesterov(m, g, h):
    """Nesterov's numerator, as ApplyAdam(use_nesterov=True): `(1 - b1) g + b1 m`."""
    return g * (1 - h.b1) + h.b1 * m


def _stored(m: jax.Array, dtype: Any) -> jax.Array:
    """`m` rounded to the slot's `dtype` (`mu_dtype`) but kept in its own: the step uses what it stores."""
    return m if m.dtype == dtype else m.astype(dtype).astype(m.dtype)


def _decayed_moments(g, m, v, h):
    """TF1's sparse moments: every row decays, the deduplicated gradient is added to its rows."""
    g = g.deduplicated()
    m = sparse.decay_and_add(g, m, h.b1, g.values * (1 - h.b1))
    return m, sparse.decay_and_add(g, v, h.b2, (g.values * g.values) * (1 - h.b2))


# --------------------------------------------------------------------------- leaf rules


def _tf1_leaf(g, m, v, h):
    """TF1's ApplyAdam: `m += (g - m)(1 - b1)`, `v += (g^2 - v)(1 - b2)`, then the epsilon-hat step."""
    m = _stored(_formulas.moment_increment(m, g, h.b1), m.dtype)
    v = _formulas.moment_increment(v, squared_as(g, v), h.b2)
    return _adam_step(m, v, h), m, v


def _tf1_rows(g, m, v, h):
    """TF1 Adam on a row-sparse gradient: the moments decay on all rows, every row of the variable moves."""
    m, v = _decayed_moments(g, m, v, h)
    return _adam_step(m, v, h), m, v


def _nesterov_leaf(g, m, v, h):
    """contrib's Nadam: ApplyAdam's moments, the Nesterov numerator."""
    m = _stored(_formulas.moment_increment(m, g, h.b1), m.dtype)
    v = _formulas.moment_increment(v, squared_as(g, v), h.b2)
    return _adam_step(_nesterov(m, g, h), v, h), m, v


def _nesterov_rows(g, m, v, h):
    """contrib's Nadam on a row-sparse gradient: the moments decay on all rows, the touched rows move."""
    g = g.deduplicated()
    m, v = _decayed_moments(g, m, v, h)
    rows = _adam_step(_nesterov(g.gather(m), g.values, h), g.gather(v), h)
    return g.with_values(g.zero_padding(rows)), m, v


def _lazy_rows(g, m, v, h):
    """LazyAdam on the touched rows (contrib's form): `m = b1 m + (1 - b1) g` there."""
    m = _stored(_formulas.moment_blend(m, g, h.b1), m.dtype)
    v = _formulas.moment_blend(v, squared_as(g, v), h.b2)
    return _adam_step(m, v, h), m, v


def _lazy_sparse(g, m, v, h):
    """contrib's LazyAdam on a row-sparse gradient: the touched rows of `m`, `v` and the variable only."""
    return sparse.apply_rows(lambda gr, mr, vr: _lazy_rows(gr, mr, vr, h), g, m, v)


# --------------------------------------------------------------------------- beta powers


def _powers_from_state(h, state, extra_args):
    """TF1's running products `beta_power`, kept in the state: the bias correction, and the next products."""
    del extra_args
    b1p, b2p = state.beta1_power, state.beta2_power
    return {"c": jnp.sqrt(1 - b2p) / (1 - b1p), "beta1_power": b1p * h.b1, "beta2_power": b2p * h.b2}


# --------------------------------------------------------------------------- the declaration


def _adam_family(
    fn: str,
    b1: Any,
    b2: Any,
    eps: Any,
    mu_dtype: Any,
    leaf: Callable[..., tuple[Any, Any, Any]],
    rows: Callable[..., tuple[Any, Any, Any]],
    powers: Callable[..., dict],
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """An Adam building block from its dense and row-sparse formulas and the source of its beta powers."""
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_float_dtype(fn, "nu_dtype", nu_dtype)
    return update_rule(
        fn,
        ScaleByAdamState,
        leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": Slot(0.0, mu_dtype), "v": Slot(0.0, nu_dtype)},
        scalars={"beta1_power": lambda h: h.b1, "beta2_power": lambda h: h.b2},
        prepare=powers,
        sparse=rows,
        tf_scalars=True,  # TF's scalars: float32 beta powers for float32 params, with or without x64
    )


_ARGS = """b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: epsilon-hat, >= 0.
      mu_dtype: dtype of `m` (default: each param's dtype).
      nu_dtype: dtype of `v` (default: each param's dtype; its squares are computed in it when wider)."""

_RAISES = """ValueError: if a beta is outside [0, 1) or `eps` is negative.
      TypeError: if `mu_dtype` or `nu_dtype` is neither a floating-point nor a complex dtype."""


def _doc(fn):
    fn.__doc__ = fn.__doc__.replace("{ARGS}", _ARGS).replace("{RAISES}", _RAISES)
    return fn


@_doc
@_factory.api
def scale_by_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam's scaling in TF1's epsilon-hat form, not `optax.scale_by_adam` (`optax_compat.scale_by_adam`).

    .. math::
        m_t = m_{t-1} + (g_t - m_{t-1})(1-\beta_1), \quad
        v_t = v_{t-1} + (g_t^2 - v_{t-1})(1-\beta_2),

        u_t = \frac{m_t \sqrt{1-\beta_2^t}/(1-\beta_1^t)}{\sqrt{v_t} + \hat\epsilon}

    Followed by `scale_by_learning_rate(lr)` this is `tf.compat.v1.train.AdamOptimizer`
    (`epsilon` is the paper's epsilon-hat, added after the bias correction).
    `beta1_power` / `beta2_power` are kept as TF keeps them: running products in the
    variables' float dtype (float32 for float32 params, with or without x64), multiplied by
    the betas after each step. A row-sparse gradient follows TF1 Adam: `m` and `v` decay on
    all rows, the gradient is added to the touched rows, and every row of the variable
    moves (a dense update; `scale_by_lazy_adam` changes the touched rows only).

    `mu_dtype` (not in TF; e.g. `jnp.bfloat16`) stores `m` in a lower precision: each step
    computes in the gradient's dtype, rounds the new `m` to `mu_dtype` and steps with the
    rounded moment it stores (so XLA updates the slot in place). That saves a seventh of
    Adam's memory traffic and a third of its state.

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState(count, m, v, beta1_power, beta2_power)`.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adam()
        >>> u, state = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 4) for x in u]  # the first step has magnitude ~1 per element
        [1.0, -1.0]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (the formula
      before section 2.1).
    """
    return _adam_family(
        "scale_by_adam", b1, b2, eps, mu_dtype, _tf1_leaf, _tf1_rows, _powers_from_state, nu_dtype
    )


@_doc
@_factory.api
def scale_by_nesterov_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam with a Nesterov numerator, as `ApplyAdam(use_nesterov=True)` (contrib's Nadam kernel).

    .. math::
        u_t = \frac{\big((1-\beta_1) g_t + \beta_1 m_t\big) \sqrt{1-\beta_2^t}/(1-\beta_1^t)}
        {\sqrt{v_t} + \hat\epsilon}

    with the moments and beta powers of `scale_by_adam`. There is no momentum schedule (it
    is not Keras' or optax's Nadam). A row-sparse gradient decays the moments on all rows
    and moves the touched rows of the variable only (contrib's sparse rule).

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState`.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_nesterov_adam()
        >>> u, _ = tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))
        >>> round(float(u[0]), 4)  # (0.1 g + 0.9 m) c / sqrt(v): 1.9
        1.9

    References:
      Dozat, *Incorporating Nesterov momentum into Adam*, ICLR 2016 workshop.
    """
    fn = "scale_by_nesterov_adam"
    return _adam_family(
        fn, b1, b2, eps, mu_dtype, _nesterov_leaf, _nesterov_rows, _powers_from_state, nu_dtype
    )


@_doc
@_factory.api
def scale_by_lazy_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""`scale_by_adam` whose row-sparse gradients change their rows only (contrib's LazyAdam).

    .. math::
        m_r = \beta_1 m_r + (1-\beta_1) g_r, \quad v_r = \beta_2 v_r + (1-\beta_2) g_r^2, \quad
        u_r = \frac{m_r \sqrt{1-\beta_2^t}/(1-\beta_1^t)}{\sqrt{v_r} + \hat\epsilon}

    on the touched rows :math:`r` of a (deduplicated) row-sparse gradient; the other rows of
    `m`, `v` and the variable do not change, so a step costs O(touched rows). Dense
    gradients give exactly `scale_by_adam`.

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState`.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> from gradtx.sparse import RowSparse
        >>> tx = gradtx.scale_by_lazy_adam()
        >>> g = RowSparse(jnp.array([1]), jnp.ones((1, 1)), (3, 1))
        >>> u, state = tx.update(g, tx.init(jnp.zeros((3, 1))))
        >>> [round(float(x), 4) for x in u.todense()[:, 0]], [round(float(x), 4) for x in state.m[:, 0]]
        ([0.0, 1.0, 0.0], [0.0, 0.1, 0.0])

    References:
      TensorFlow, `tf.contrib.opt.LazyAdamOptimizer` (lazy_adam_optimizer.py).
    """
    return _adam_family(
        "scale_by_lazy_adam", b1, b2, eps, mu_dtype, _tf1_leaf, _lazy_sparse, _powers_from_state, nu_dtype
    )
