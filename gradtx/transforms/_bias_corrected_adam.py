"""Adam as the paper's Algorithm 1 writes it: `scale_by_bias_corrected_adam`, `scale_by_bias_corrected_rms`.

Both moments are divided by their bias corrections and epsilon is added to the root of the
corrected second moment (optax's `scale_by_adam` / `scale_by_rms(bias_correction=True)`).
TF1's Adam (`scale_by_adam`) folds the corrections into the step size and adds an
epsilon-hat instead; the two differ in where epsilon acts. LAMB, Muon's fallback and
schedule-free AdamW are written on this form.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse


class ScaleByBiasCorrectedAdamState(NamedTuple):
    """State of `scale_by_bias_corrected_adam`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # first moment (starts at 0)
    v: _protocol.Updates  # second moment (starts at 0)


class ScaleByBiasCorrectedRmsState(NamedTuple):
    """State of `scale_by_bias_corrected_rms`."""

    count: _protocol.Count  # int32: completed updates
    v: _protocol.Updates  # second moment (starts at 0)


def bias_corrected(moment: jax.Array, decay: Any, t: jax.Array) -> jax.Array:
    """`moment / (1 - decay^t)`: the power in at least float32 (so it does not round to 1), the division
    in the moment's dtype."""
    wide = jnp.promote_types(moment.dtype, jnp.float32)
    return moment / (1 - jnp.asarray(decay, wide) ** t).astype(moment.dtype)


def first_moment_estimate(m: jax.Array, g: jax.Array, b1: Any, t: jax.Array, nesterov: bool) -> jax.Array:
    """The corrected first moment `m / (1 - b1^t)`, or Nesterov's `b1 m / (1 - b1^(t+1)) + (1 - b1) g /
    (1 - b1^t)` (Adam's and Muon's)."""
    if nesterov:
        return b1 * bias_corrected(m, b1, _tree.increment(t)) + (1 - b1) * bias_corrected(g, b1, t)
    return bias_corrected(m, b1, t)


def _step(m_hat: jax.Array, v: jax.Array, b2: Any, t: jax.Array, eps: Any, eps_root: Any) -> jax.Array:
    """`m_hat / (sqrt(v_hat + eps_root) + eps)` with `v_hat = v / (1 - b2^t)`."""
    v_hat = bias_corrected(v, b2, t)
    return m_hat / (jnp.sqrt(v_hat + _tree.like(eps_root, v_hat)) + _tree.like(eps, v_hat))


def _check_common(fn: str, eps: Any, eps_root: Any) -> None:
    for name, value in (("eps", eps), ("eps_root", eps_root)):
        _checks.check_finite(fn, name, value)
        _checks.check_nonnegative(fn, name, value)


@_base.api
def scale_by_bias_corrected_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    *,
    nesterov: bool = False,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam's scaling with bias-corrected moments and epsilon outside the root (the paper's Algorithm 1).

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \\
        \hat m_t = \frac{m_t}{1-\beta_1^t}, \quad \hat v_t = \frac{v_t}{1-\beta_2^t}, \quad
        u_t = \frac{\hat m_t}{\sqrt{\hat v_t + \epsilon_{root}} + \epsilon}

    With `nesterov`, :math:`\hat m_t = \beta_1 m_t / (1-\beta_1^{t+1}) + (1-\beta_1) g_t /
    (1-\beta_1^t)` (Dozat's NAdam, optax's form). These are the numbers of
    `optax.scale_by_adam`; gradtx's `scale_by_adam` is TF1's epsilon-hat form instead. A
    row-sparse gradient is densified first (both moments decay on every row).

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      nesterov: use Nesterov's form of the first moment.
      mu_dtype: dtype of `m` (default: each param's dtype).

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedAdamState(count, m, v)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.
      TypeError: for a non-bool `nesterov` or a non-float `mu_dtype`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_adam(eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]  # the first step: sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 1);
      Dozat, *Incorporating Nesterov momentum into Adam*, ICLR 2016 workshop.
    """
    fn = "scale_by_bias_corrected_adam"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _check_common(fn, eps, eps_root)
    _checks.check_bool(fn, "nesterov", nesterov)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)

    def init_fn(params):
        return ScaleByBiasCorrectedAdamState(
            _tree.zero_count(), _tree.zeros_like(params, mu_dtype), _tree.zeros_like(params)
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_, eps_root_ = (
            _tree.scalar(_tree.resolve(h, state.count), updates) for h in (b1, b2, eps, eps_root)
        )
        t = _tree.increment(state.count)

        def leaf(g, m, v):
            new_m = _tree.moment_blend(m, g, b1_)
            new_v = _tree.moment_blend(v, _tree.abs_sq(g), b2_)
            m_hat = first_moment_estimate(new_m, g, b1_, t, nesterov)
            out = _step(m_hat, new_v, b2_, t, eps_, eps_root_)
            return out.astype(g.dtype), new_m.astype(m.dtype), new_v.astype(v.dtype)

        out, m, v = _tree.split_map(
            fn, leaf, 3, sparse.densify(updates), state.m, state.v, names=("updates", "state.m", "state.v")
        )
        return out, ScaleByBiasCorrectedAdamState(t, m, v)

    return _protocol.ElementWise(init_fn, update_fn)


@_base.api
def scale_by_bias_corrected_rms(
    decay: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Divide by the root of the bias-corrected second moment: Adam without a first moment.

    .. math::
        v_t = \beta v_{t-1} + (1-\beta) g_t^2, \qquad
        u_t = \frac{g_t}{\sqrt{v_t / (1-\beta^t) + \epsilon_{root}} + \epsilon}

    `scale_by_bias_corrected_adam` with :math:`\beta_1 = 0`, without storing the unused
    first moment (`optax.scale_by_rms(eps_in_sqrt=False, bias_correction=True)`): the base
    step of schedule-free AdamW. A row-sparse gradient is densified first.

    Args:
      decay: :math:`\beta`, the decay of the second moment, in [0, 1).
      eps: added to the root, >= 0.
      eps_root: added under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedRmsState(count, v)`.

    Raises:
      ValueError: if `decay` is outside [0, 1) or `eps` / `eps_root` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_rms(eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]
        Array([ 1., -1.], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 1,
      :math:`\beta_1 = 0`); Defazio et al., *The road less scheduled*, NeurIPS 2024 (Algorithm 1).
    """
    fn = "scale_by_bias_corrected_rms"
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0, high_open=True)
    _check_common(fn, eps, eps_root)

    def init_fn(params):
        return ScaleByBiasCorrectedRmsState(_tree.zero_count(), _tree.zeros_like(params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b2_, eps_, eps_root_ = (
            _tree.scalar(_tree.resolve(h, state.count), updates) for h in (decay, eps, eps_root)
        )
        t = _tree.increment(state.count)

        def leaf(g, v):
            new_v = _tree.moment_blend(v, _tree.abs_sq(g), b2_)
            return _step(g, new_v, b2_, t, eps_, eps_root_).astype(g.dtype), new_v.astype(v.dtype)

        out, v = _tree.split_map(fn, leaf, 2, sparse.densify(updates), state.v, names=("updates", "state.v"))
        return out, ScaleByBiasCorrectedRmsState(t, v)

    return _protocol.ElementWise(init_fn, update_fn)
