"""Adam's relatives that keep a maximum: `scale_by_adamax` (contrib's AdaMax, an infinity norm) and
`scale_by_amsgrad` (RETURNN's AMSGrad, a running maximum of the second moment)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse


class ScaleByAdamaxState(NamedTuple):
    """State of `scale_by_adamax`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": first moment (starts at 0)
    v: _protocol.Updates  # TF slot "v": exponentially weighted infinity norm (starts at 0)
    beta1_power: jax.Array  # TF's non-slot "beta1_power": b1**(count+1), a running product


@_base.api
def scale_by_adamax(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""AdaMax's scaling (Adam with the infinity norm), as contrib's `ApplyAdaMax` kernel.

    .. math::
        m_t = m_{t-1} + (g_t - m_{t-1})(1-\beta_1), \quad
        v_t = \max(\beta_2 v_{t-1}, |g_t|), \quad
        u_t = \frac{1}{1-\beta_1^t}\,\frac{m_t}{v_t + \epsilon}

    Followed by `scale_by_learning_rate(lr)` this is `tf.contrib.opt.AdaMaxOptimizer`.
    Only `beta1_power` is kept (a float32 running product, as TF). Row-sparse gradients
    change the touched rows only (contrib's Python rule, with
    `m = m*b1 + g*(1-b1)` on those rows).

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to the norm, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByAdamaxState(count, m, v, beta1_power)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adamax(eps=0.0)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 5) for x in u]  # m = 0.1 g, v = |g|, / (1 - 0.9)
        [1.0, -1.0]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015, section 7.1.
    """
    fn = "scale_by_adamax"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)

    def init_fn(params):
        zero = _tree.zero_count()
        return ScaleByAdamaxState(
            zero,
            _tree.zeros_like(params),
            _tree.zeros_like(params),
            _tree.scalar(_tree.resolve(b1, zero), params),
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        dt = state.beta1_power.dtype  # TF's scalars follow the variables' dtype
        b1_, b2_, eps_ = (jnp.asarray(_tree.resolve(h, state.count), dt) for h in (b1, b2, eps))
        correction = 1 / (1 - state.beta1_power)

        def step(m, v, e, cv):
            return (m / (v + e)) * cv

        def dense_rule(g, m, v):
            b1v, b2v, e, cv = (_tree.like(x, g) for x in (b1_, b2_, eps_, correction))
            m = _tree.moment_increment(m, g, b1v)
            v = jnp.maximum(b2v * v, jnp.abs(g))
            return step(m, v, e, cv), m, v

        def rows_rule(g, m, v):
            b1v, b2v, e, cv = (_tree.like(x, g) for x in (b1_, b2_, eps_, correction))
            m = _tree.moment_blend(m, g, b1v)
            v = jnp.maximum(v * b2v, jnp.abs(g))
            return step(m, v, e, cv), m, v

        def leaf(g, m, v):
            rule = (
                dense_rule if not _tree.is_row_sparse(g) else functools.partial(sparse.apply_rows, rows_rule)
            )
            out, new_m, new_v = rule(g, m, v)
            return out, new_m.astype(m.dtype), new_v.astype(v.dtype)  # slots keep their dtypes

        out, m, v = _tree.split_map(
            fn, leaf, 3, updates, state.m, state.v, names=("updates", "state.m", "state.v")
        )
        return out, ScaleByAdamaxState(
            _tree.increment(state.count), m, v, (state.beta1_power * b1_).astype(state.beta1_power.dtype)
        )

    return _protocol.ElementWise(init_fn, update_fn)


class ScaleByAmsgradState(NamedTuple):
    """State of `scale_by_amsgrad`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # RETURNN's "m" (starts at 0)
    v: _protocol.Updates  # RETURNN's "v" (starts at 0)
    v_hat: _protocol.Updates  # RETURNN's "v_hat": the running maximum of v (starts at 0)


@_base.api
def scale_by_amsgrad(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 0.0,
    *,
    decay: bool = False,
) -> _protocol.GradientTransformation:
    r"""AMSGrad's scaling as RETURNN's `AMSGradOptimizer` computes it (no bias correction).

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \quad
        \hat v_t = \max(\hat v_{t-1}, v_t), \quad
        u_t = \frac{m_t}{\epsilon + \sqrt{\hat v_t}}

    With `decay=True` the step is also divided by :math:`\sqrt{t}` (RETURNN's
    `learning_rate /= sqrt(t)`). RETURNN has no sparse rule (TF densifies the gradient),
    so row-sparse gradients are densified. With RETURNN's default `eps = 0` a parameter
    whose gradient has always been 0 gets 0/0: pass a small `eps` to avoid it.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root, >= 0.
      decay: divide by the square root of the step number.

    Returns:
      A `GradientTransformation` with state `ScaleByAmsgradState(count, m, v, v_hat)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_amsgrad(b1=0.5, b2=0.75)
        >>> u, _ = tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))
        >>> float(u[0])  # m = 1, v = 1: 1 / sqrt(1)
        1.0

    References:
      Reddi, Kale, Kumar, *On the convergence of Adam and beyond*, ICLR 2018.
    """
    fn = "scale_by_amsgrad"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "decay", decay)

    def init_fn(params):
        return ScaleByAmsgradState(_tree.zero_count(), *(_tree.zeros_like(params) for _ in range(3)))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_ = (_tree.resolve(h, state.count) for h in (b1, b2, eps))
        t = _tree.scalar(state.count + 1, updates)  # the step

        def rule(g, m, v, v_hat):
            b1v, b2v, e = (_tree.like(x, g) for x in (b1_, b2_, eps_))
            new_m = _tree.moment_blend(m, g, b1v)
            new_v = _tree.moment_blend(v, _tree.abs_sq(g), b2v)
            new_v_hat = jnp.maximum(v_hat, new_v)
            u = new_m / (e + jnp.sqrt(new_v_hat))
            u = u / _tree.like(jnp.sqrt(t), u) if decay else u
            return u, new_m.astype(m.dtype), new_v.astype(v.dtype), new_v_hat.astype(v_hat.dtype)

        out = _tree.split_map(
            fn,
            rule,
            4,
            sparse.densify(updates),
            state.m,
            state.v,
            state.v_hat,
            names=("updates", "state.m", "state.v", "state.v_hat"),
        )
        return out[0], ScaleByAmsgradState(_tree.increment(state.count), *out[1:])

    return _protocol.ElementWise(init_fn, update_fn)
