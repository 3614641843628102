"""Adam as the paper's Algorithm 1 writes it: `scale_by_bias_corrected_adam`, `scale_by_bias_corrected_rms`.

Both moments are divided by their bias corrections and epsilon is added to the root of the
corrected second moment (optax's `scale_by_adam` / `scale_by_rms(bias_correction=True)`).
TF1's Adam (`scale_by_adam`) folds the corrections into the step size and adds an
epsilon-hat instead; the two differ in where epsilon acts. LAMB, Muon's fallback and
schedule-free AdamW are written on this form.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core.rule import Slot, update_rule


class ScaleByBiasCorrectedAdamState(NamedTuple):
    """State of `scale_by_bias_corrected_adam`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # first moment (starts at 0)
    v: _protocol.Updates  # second moment (starts at 0)


class ScaleByBiasCorrectedRmsState(NamedTuple):
    """State of `scale_by_bias_corrected_rms`."""

    count: _protocol.Count  # int32: completed updates
    v: _protocol.Updates  # second moment (starts at 0)


@functools.partial(jax.jit, inline=True)
def correction(decay, t):
    """`1 - decay^t`: Adam's bias correction at step `t`, compiled even in an eager step (as optax's), so
    that eager and jitted steps share XLA's `pow` and its numbers."""
    return 1 - decay**t


def corrections(
    h, state, extra_args, *, b1: str | None = "b1", b2: str | None = "b2", nesterov: bool = False
):
    """Adam's bias corrections at step `h.t` (a `prepare`): `bc1 = 1 - b1^t`, `bc2 = 1 - b2^t`, and for
    Nesterov `bc1_next = 1 - b1^(t+1)`; `b1`, `b2` name the decays among the hyperparameters.

    The power is formed as optax forms it: a Python decay to an int32 step gives float32 (float64
    under x64), so it does not round to 1 in a low-precision leaf; each leaf divides in its dtype.
    """
    del state, extra_args
    out = {}
    if b1 is not None:
        out["bc1"] = correction(getattr(h, b1), h.t)
    if b2 is not None:
        out["bc2"] = correction(getattr(h, b2), h.t)
    if nesterov and b1 is not None:
        out["bc1_next"] = correction(getattr(h, b1), _hyper.increment(h.t))
    return out


def squared_as(g, v):
    """`|g|**2` computed in the dtype of the second moment `v` when it is wider (`nu_dtype`): a float32
    `nu` of bf16 gradients gets float32 squares, not bf16 ones widened."""
    wide = jnp.promote_types(g.dtype, v.dtype)
    return _formulas.abs_sq(g if g.dtype == wide else g.astype(wide))


def first_moment_estimate(m, g, b1, h, nesterov: bool):
    """The corrected first moment `m / (1 - b1^t)`, or Nesterov's `b1 m / (1 - b1^(t+1)) + (1 - b1) g /
    (1 - b1^t)` (Adam's and Muon's); `h` holds the corrections of `corrections`."""
    if nesterov:
        return b1 * (m / h.bc1_next) + (1 - b1) * (g / h.bc1)
    return m / h.bc1


def corrected_step(m_hat, v, h):
    """`m_hat / (sqrt(v_hat + eps_root) + eps)` with `v_hat = v / (1 - b2^t)`."""
    return m_hat / (jnp.sqrt(v / h.bc2 + h.eps_root) + h.eps)


def _adam_leaf(g, m, v, h, *, nesterov: bool):
    m = _formulas.moment_blend(m, g, h.b1)
    v = _formulas.moment_blend(v, squared_as(g, v), h.b2)
    return corrected_step(first_moment_estimate(m, g, h.b1, h, nesterov), v, h), m, v


def _rms_leaf(g, v, h):
    v = _formulas.moment_blend(v, _formulas.abs_sq(g), h.decay)
    return corrected_step(g, v, h), v


def _check_common(fn: str, eps: Any, eps_root: Any) -> None:
    for name, value in (("eps", eps), ("eps_root", eps_root)):
        _checks.check_finite(fn, name, value)
        _checks.check_nonnegative(fn, name, value)


@_factory.api
def scale_by_bias_corrected_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    *,
    nesterov: bool = False,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
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
      nu_dtype: dtype of `v` (default: each param's dtype; `jnp.float32` keeps the second moment
        of bf16 params in float32, its squares computed there).

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedAdamState(count, m, v)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.
      TypeError: for a non-bool `nesterov` or a `mu_dtype` / `nu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_adam(eps=0.0)
        >>> u = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]
        >>> u  # the first step: sign(g), with optax's roundings (1 - b in double, 1 - b**t in float32)
        Array([ 0.9999934, -0.9999934], dtype=float32)

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
    _checks.check_float_dtype(fn, "nu_dtype", nu_dtype)

    return update_rule(
        fn,
        ScaleByBiasCorrectedAdamState,
        functools.partial(_adam_leaf, nesterov=nesterov),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"m": Slot(0.0, mu_dtype), "v": Slot(0.0, nu_dtype)},
        prepare=functools.partial(corrections, nesterov=nesterov),
    )


@_factory.api
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
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 1,
      :math:`\beta_1 = 0`); Defazio et al., *The road less scheduled*, NeurIPS 2024 (Algorithm 1).
    """
    fn = "scale_by_bias_corrected_rms"
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0, high_open=True)
    _check_common(fn, eps, eps_root)

    return update_rule(
        fn,
        ScaleByBiasCorrectedRmsState,
        _rms_leaf,
        hyper={"decay": decay, "eps": eps, "eps_root": eps_root},
        slots={"v": 0.0},
        prepare=functools.partial(corrections, b1=None, b2="decay"),
    )
