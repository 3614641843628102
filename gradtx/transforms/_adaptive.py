"""Adam's successors in the paper's form: `scale_by_radam` (RAdam), `scale_by_belief` (AdaBelief) and
`scale_by_yogi` (Yogi).

All three divide a bias-corrected first moment by the root of a bias-corrected second
statistic with epsilon outside the root, the form of `scale_by_bias_corrected_adam` (whose
step they share), not TF1's epsilon-hat form of `scale_by_adam`. They differ in the
statistic (RAdam: Adam's, rectified while its variance is undefined; AdaBelief: the
deviation of the gradient from its momentum; Yogi: an additive, sign-controlled update).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse
from gradtx.transforms._bias_corrected_adam import _step as corrected_step
from gradtx.transforms._bias_corrected_adam import bias_corrected, first_moment_estimate


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


def _resolved(count: jax.Array, updates: Any, *values: Any) -> list[jax.Array]:
    """The hyperparameters at step `count`, as scalars of the updates' scalar dtype."""
    return [_tree.scalar(_tree.resolve(h, count), updates) for h in values]


def _rectification(b2: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""RAdam's `(rho_t, r_t)` at 1-based step `t`: the length of the approximated moving average and the
    variance rectification (optax's arithmetic, in the scalars' dtype)."""
    rho_inf = 2.0 / (1.0 - b2) - 1.0
    b2t = b2**t
    rho = rho_inf - 2 * t * b2t / (1 - b2t)
    r2 = (rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)
    return rho, jnp.sqrt(jnp.maximum(r2, 0.0))  # r2 < 0 only where rho < 4: never a rectified step


@_base.api
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
    `optax.scale_by_radam`, computed as it computes them in the scalars' dtype (float32 for
    float32 params: :math:`\rho_t` carries a rounding error of a few hundredths in the
    first steps). A row-sparse gradient is densified first.

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
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]  # step 1: the corrected momentum, g
        Array([ 2. , -0.5], dtype=float32)

    References:
      Liu et al., *On the variance of the adaptive learning rate and beyond*, ICLR 2020
      (Algorithm 2).
    """
    fn = "scale_by_radam"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_in_range(fn, "threshold", threshold, 4.0, math.inf)
    _checks.check_bool(fn, "nesterov", nesterov)

    def init_fn(params):
        return ScaleByRadamState(_tree.zero_count(), _tree.zeros_like(params), _tree.zeros_like(params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_, eps_root_, threshold_ = _resolved(
            state.count, updates, b1, b2, eps, eps_root, threshold
        )
        t = _tree.increment(state.count)
        rho, r = _rectification(b2_, t)
        rectified = rho >= threshold_

        def leaf(g, m, v):
            new_m = _tree.moment_blend(m, g, b1_)
            new_v = _tree.moment_blend(v, _tree.abs_sq(g), b2_)
            m_hat = first_moment_estimate(new_m, g, b1_, t, nesterov)
            step = corrected_step(r.astype(m_hat.dtype) * m_hat, new_v, b2_, t, eps_, eps_root_)
            out = jnp.where(rectified, step, m_hat)
            return out.astype(g.dtype), new_m.astype(m.dtype), new_v.astype(v.dtype)

        out, m, v = _tree.split_map(
            fn, leaf, 3, sparse.densify(updates), state.m, state.v, names=("updates", "state.m", "state.v")
        )
        return out, ScaleByRadamState(t, m, v)

    return _protocol.ElementWise(init_fn, update_fn)


@_base.api
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
        >>> u  # m = 0.1 g, s = 0.001 (0.9 g)^2: 0.1 g / (0.9 |g| 0.1) = sign(g) / 0.9
        Array([ 1.1111112, -1.1111112], dtype=float32)

    References:
      Zhuang et al., *AdaBelief optimizer: adapting stepsizes by the belief in observed
      gradients*, NeurIPS 2020 (Algorithm 2).
    """
    fn = "scale_by_belief"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_bool(fn, "nesterov", nesterov)

    def init_fn(params):
        return ScaleByBeliefState(_tree.zero_count(), _tree.zeros_like(params), _tree.zeros_like(params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_, eps_root_ = _resolved(state.count, updates, b1, b2, eps, eps_root)
        t = _tree.increment(state.count)
        no_root = jnp.zeros([], b2_.dtype)  # eps_root is already in s

        def leaf(g, m, s):
            new_m = _tree.moment_blend(m, g, b1_)
            surprise = g - new_m
            new_s = _tree.moment_blend(s, _tree.abs_sq(surprise), b2_)
            new_s = new_s + _tree.like(eps_root_, new_s)
            m_hat = first_moment_estimate(new_m, g, b1_, t, nesterov)
            out = corrected_step(m_hat, new_s, b2_, t, eps_, no_root)
            return out.astype(g.dtype), new_m.astype(m.dtype), new_s.astype(s.dtype)

        out, m, s = _tree.split_map(
            fn, leaf, 3, sparse.densify(updates), state.m, state.s, names=("updates", "state.m", "state.s")
        )
        return out, ScaleByBeliefState(t, m, s)

    return _protocol.ElementWise(init_fn, update_fn)


@_base.api
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
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]  # v_1 = (1 - b2) g^2: sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Zaheer, Reddi, Sachan, Kale, Kumar, *Adaptive methods for nonconvex optimization*,
      NeurIPS 2018 (Algorithm 2).
    """
    fn = "scale_by_yogi"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_number(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "initial_accumulator_value", initial_accumulator_value)

    def init_fn(params):
        return ScaleByYogiState(
            _tree.zero_count(),
            _tree.full_like(params, initial_accumulator_value),
            _tree.full_like(params, initial_accumulator_value),
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_, eps_root_ = _resolved(state.count, updates, b1, b2, eps, eps_root)
        t = _tree.increment(state.count)

        def leaf(g, m, v):
            new_m = _tree.moment_blend(m, g, b1_)
            g2 = _tree.abs_sq(g)
            new_v = v - (1 - b2_) * jnp.sign(v - g2) * g2
            out = corrected_step(bias_corrected(new_m, b1_, t), new_v, b2_, t, eps_, eps_root_)
            return out.astype(g.dtype), new_m.astype(m.dtype), new_v.astype(v.dtype)

        out, m, v = _tree.split_map(
            fn, leaf, 3, sparse.densify(updates), state.m, state.v, names=("updates", "state.m", "state.v")
        )
        return out, ScaleByYogiState(t, m, v)

    return _protocol.ElementWise(init_fn, update_fn)
