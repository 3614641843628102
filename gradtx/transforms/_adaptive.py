"""Adam's successors in the paper's form: `scale_by_radam` (RAdam), `scale_by_belief` (AdaBelief) and
`scale_by_yogi` (Yogi).

All three divide a bias-corrected first moment by the root of a bias-corrected second
statistic with epsilon outside the root, the form of `scale_by_bias_corrected_adam` (whose
step they share), not TF1's epsilon-hat form of `scale_by_adam`. They differ in the
statistic (RAdam: Adam's, rectified while its variance is undefined; AdaBelief: the
deviation of the gradient from its momentum; Yogi: an additive, sign-controlled update).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core.rule import update_rule
from gradtx.transforms._bias_corrected_adam import corrected_step, corrections, first_moment_estimate


class ScaleByRadamState(NamedTuple):
    """State of `scale_by_radam`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # first moment (starts at 0)
    v: _protocol.Updates  # second moment (starts at 0)


class ScaleByBeliefState(NamedTuple):
    """State of `scale_by_belief`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # first moment (starts at 0)
    s: _protocol.Updates  # the moving average of (g - m)^2, plus eps_root per step (starts at 0)


class ScaleByYogiState(NamedTuple):
    """State of `scale_by_yogi`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # first moment (starts at initial_accumulator_value)
    v: _protocol.Updates  # second moment, moved additively (starts at initial_accumulator_value)


def _check_betas_and_eps(fn: str, b1: Any, b2: Any, eps: Any, eps_root: Any) -> None:
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps_root", eps_root)


def _radam_prepare(h, state, extra_args, *, nesterov: bool):
    r"""The corrections, and RAdam's rectification at step `t`: :math:`r_t`, and whether :math:`\rho_t`
    reaches the threshold (optax's arithmetic: :math:`\rho_\infty` in double for a Python `b2`)."""
    out = corrections(h, state, extra_args, nesterov=nesterov)
    rho_inf = 2.0 / (1.0 - h.b2) - 1.0
    b2t = h.b2**h.t
    rho = rho_inf - 2 * h.t * b2t / (1 - b2t)
    r2 = (rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)
    out["r"] = jnp.sqrt(jnp.maximum(r2, 0.0))  # r2 < 0 only where rho < 4: never a rectified step
    out["rectified"] = rho >= h.threshold
    return out


def _radam_leaf(g, m, v, h, *, nesterov: bool):
    m = _formulas.moment_blend(m, g, h.b1)
    v = _formulas.moment_blend(v, _formulas.abs_sq(g), h.b2)
    m_hat = first_moment_estimate(m, g, h.b1, h, nesterov)
    return jnp.where(h.rectified, corrected_step(h.r * m_hat, v, h), m_hat), m, v


def _belief_leaf(g, m, s, h, *, nesterov: bool):
    m = _formulas.moment_blend(m, g, h.b1)
    s = _formulas.moment_blend(s, _formulas.abs_sq(g - m), h.b2) + h.eps_root  # eps_root is kept in s
    return first_moment_estimate(m, g, h.b1, h, nesterov) / (jnp.sqrt(s / h.bc2) + h.eps), m, s


def _yogi_leaf(g, m, v, h):
    m = _formulas.moment_blend(m, g, h.b1)
    g2 = _formulas.abs_sq(g)
    v = v - (1 - h.b2) * jnp.sign(v - g2) * g2
    return corrected_step(m / h.bc1, v, h), m, v


@_factory.api
def scale_by_radam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    threshold: _protocol.ScalarOrSchedule = 5.0,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""Rectified Adam: momentum alone while the second moment's variance is undefined, then rectified Adam.

    .. math::
        m_t, v_t, \hat m_t, \hat v_t \text{ as in Adam}, \qquad
        \rho_\infty = \frac{2}{1-\beta_2} - 1, \quad
        \rho_t = \rho_\infty - \frac{2 t \beta_2^t}{1-\beta_2^t}, \\
        r_t = \sqrt{\frac{(\rho_t-4)(\rho_t-2)\rho_\infty}{(\rho_\infty-4)(\rho_\infty-2)\rho_t}}, \qquad
        u_t = \begin{cases} r_t\, \hat m_t / (\sqrt{\hat v_t + \epsilon_{root}} + \epsilon)
              & \rho_t \ge \text{threshold} \\ \hat m_t & \text{otherwise} \end{cases}

    The rectification replaces a learning-rate warmup: the first steps (about 5 with the
    defaults) are bias-corrected momentum steps. With `nesterov`, :math:`\hat m_t` is
    Nesterov's (as in `scale_by_bias_corrected_adam`). These are the numbers of
    `optax.scale_by_radam`, computed as it computes them (:math:`\rho_\infty` in double
    precision for a Python `b2`, :math:`\rho_t` in float32). A row-sparse gradient is
    densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      threshold: the smallest :math:`\rho_t` that takes a rectified step, >= 4 (the paper's 4,
        optax's 5).
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` transform with state `ScaleByRadamState(count, m, v)`.

    Raises:
      ValueError: if a beta is outside [0, 1), `eps` / `eps_root` is negative or `threshold` < 4.
      TypeError: for a non-bool `nesterov`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_radam()
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # step 1: the corrected m, g
        Array([ 2. , -0.5], dtype=float32)

    References:
      Liu et al., *On the variance of the adaptive learning rate and beyond*, ICLR 2020
      (Algorithm 2).
    """
    fn = "scale_by_radam"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_in_range(fn, "threshold", threshold, 4.0, math.inf)
    _checks.check_bool(fn, "nesterov", nesterov)

    return update_rule(
        fn,
        ScaleByRadamState,
        functools.partial(_radam_leaf, nesterov=nesterov),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root, "threshold": threshold},
        slots={"m": 0.0, "v": 0.0},
        prepare=functools.partial(_radam_prepare, nesterov=nesterov),
    )


@_factory.api
def scale_by_belief(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    eps_root: _protocol.ScalarOrSchedule = 1e-16,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""AdaBelief's scaling: Adam whose second moment tracks the gradient's deviation from its momentum.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        s_t = \beta_2 s_{t-1} + (1-\beta_2)(g_t - m_t)^2 + \epsilon_{root}, \\
        u_t = \frac{m_t / (1-\beta_1^t)}{\sqrt{s_t / (1-\beta_2^t)} + \epsilon}

    A gradient close to what the momentum predicts (a small "surprise") gets a large
    step, one far from it a small step. :math:`\epsilon_{root}` is added to the state at
    every step, as in the paper. With `nesterov`, the corrected first moment is Nesterov's
    (as in `scale_by_bias_corrected_adam`). These are the numbers of `optax.scale_by_belief`
    (and its defaults; the paper's are `eps=1e-8`, `eps_root=0`). A row-sparse gradient is
    densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` transform with state `ScaleByBeliefState(count, m, s)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.
      TypeError: for a non-bool `nesterov`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_belief()
        >>> u, state = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> u.round(4)  # m = 0.1 g, s = 0.001 (0.9 g)^2: 0.1 g / (0.9 |g| 0.1) = sign(g) / 0.9
        Array([ 1.1111, -1.1111], dtype=float32)

    References:
      Zhuang et al., *AdaBelief optimizer: adapting stepsizes by the belief in observed
      gradients*, NeurIPS 2020 (Algorithm 2).
    """
    fn = "scale_by_belief"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_bool(fn, "nesterov", nesterov)

    return update_rule(
        fn,
        ScaleByBeliefState,
        functools.partial(_belief_leaf, nesterov=nesterov),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"m": 0.0, "s": 0.0},
        prepare=functools.partial(corrections, nesterov=nesterov),
    )


@_factory.api
def scale_by_yogi(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-3,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    initial_accumulator_value: float = 1e-6,
) -> _protocol.GradientTransformation:
    r"""Yogi's scaling: Adam whose second moment moves additively, by at most :math:`(1-\beta_2) g^2` a step.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        v_t = v_{t-1} - (1-\beta_2)\,\operatorname{sign}(v_{t-1} - g_t^2)\, g_t^2, \\
        u_t = \frac{m_t / (1-\beta_1^t)}{\sqrt{v_t / (1-\beta_2^t) + \epsilon_{root}} + \epsilon}

    Adam's :math:`v` forgets a large past gradient multiplicatively; Yogi's shrinks it by
    an amount set by the current gradient, so the effective rate grows slowly after a burst
    of large gradients. Both moments start at `initial_accumulator_value`. These are the
    numbers and defaults of `optax.scale_by_yogi` (the paper's Algorithm 2 has no bias
    correction). A row-sparse gradient is densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: the second moment's rate, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      initial_accumulator_value: the initial value of both moments, >= 0 (a number: it is used once).

    Returns:
      An `ElementWise` transform with state `ScaleByYogiState(count, m, v)`.

    Raises:
      ValueError: if a beta is outside [0, 1), or `eps`, `eps_root` or `initial_accumulator_value`
        is negative.
      TypeError: for a schedule as `initial_accumulator_value`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_yogi(eps=0.0, initial_accumulator_value=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # v_1 = (1-b2) g^2: sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Zaheer, Reddi, Sachan, Kale, Kumar, *Adaptive methods for nonconvex optimization*,
      NeurIPS 2018 (Algorithm 2).
    """
    fn = "scale_by_yogi"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_number(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "initial_accumulator_value", initial_accumulator_value)

    return update_rule(
        fn,
        ScaleByYogiState,
        _yogi_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"m": initial_accumulator_value, "v": initial_accumulator_value},
        prepare=corrections,
    )
