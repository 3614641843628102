"""The Adam family: `scale_by_adam` (TF1's ApplyAdam, epsilon-hat; Nesterov, lazy and global-step
variants), `scale_by_adamax` (contrib's ApplyAdaMax), `scale_by_amsgrad` (RETURNN's AMSGrad)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, _vma, sparse


class ScaleByAdamState(NamedTuple):
    """State of `scale_by_adam`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": first moment (starts at 0)
    v: _protocol.Updates  # TF slot "v": second moment (starts at 0)
    beta1_power: jax.Array  # float32 (float64 under x64), TF's non-slot "beta1_power": b1**(count+1)
    beta2_power: jax.Array  # float32 (float64 under x64), TF's non-slot "beta2_power": b2**(count+1)


def _adam_step(m, v, g, b1, c, eps, nesterov):
    """The epsilon-hat step from the new moments: `m c / (sqrt(v) + eps)` (Nesterov: m -> g(1-b1) + b1 m)."""
    num = g * (1 - b1) + b1 * m if nesterov else m
    return (num * c) / (jnp.sqrt(v) + eps)


def _as_stored(m: jax.Array, dtype: Any) -> jax.Array:
    """`m` rounded to the slot's `dtype` (`mu_dtype`), kept in its own: the step uses the moment it stores."""
    return m if m.dtype == dtype else m.astype(dtype).astype(m.dtype)


@_base.api
def scale_by_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    nesterov: bool = False,
    lazy: bool = False,
    use_global_step: bool = False,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam's scaling in TF1's epsilon-hat form, with TF's float32 `beta_power` accumulators.

    .. math::
        m_t = m_{t-1} + (g_t - m_{t-1})(1-\beta_1), \quad
        v_t = v_{t-1} + (g_t^2 - v_{t-1})(1-\beta_2), \quad
        u_t = \frac{m_t \sqrt{1-\beta_2^t}/(1-\beta_1^t)}{\sqrt{v_t} + \hat\epsilon}

    Followed by `scale_by_learning_rate(lr)` this is `tf.compat.v1.train.AdamOptimizer`
    (`epsilon` is the paper's epsilon-hat, added after the bias correction). With
    `nesterov=True`, :math:`m_t` in the numerator becomes :math:`(1-\beta_1) g_t + \beta_1 m_t`
    (`ApplyAdam(use_nesterov=True)`, contrib's Nadam). `beta1_power` / `beta2_power` are
    kept as TF keeps them: float32 products, multiplied by the betas after each step.

    Row-sparse gradients follow TF:
    - default (TF1 Adam): `m` and `v` decay on all rows, the gradient is added to the
      touched rows, and every row of the variable moves (a dense update);
    - `nesterov=True` (contrib Nadam): moments as above, the variable moves on the
      touched rows only;
    - `lazy=True` (contrib LazyAdam): only the touched rows of `m`, `v` and the variable
      change.

    With `use_global_step=True` (contrib's AdamGS / LazyAdamGS) the bias correction comes
    from the extra argument `global_step` of `update` (TF's global step read during the
    step, `t - 1`): `beta_power = pow(beta, float(global_step + 1))`, as AdamGS computes it,
    instead of the state's running products.

    `mu_dtype` (not in TF; e.g. `jnp.bfloat16`) stores `m` in a lower precision: each step
    computes in the gradient's dtype, rounds the new `m` to `mu_dtype` and steps with the
    rounded moment it stores (so XLA updates the slot in place). That saves a seventh of
    Adam's memory traffic and a third of its state.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: epsilon-hat, >= 0.
      nesterov: use the Nesterov numerator.
      lazy: row-sparse gradients change the touched rows only (LazyAdam).
      use_global_step: take the bias correction from the extra argument `global_step`.
      mu_dtype: dtype of `m` (default: each param's dtype).

    Returns:
      A `GradientTransformation` with state `ScaleByAdamState`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` is negative.
      TypeError: if `mu_dtype` is not a floating-point dtype.
      MissingExtraArgError: (when traced) `use_global_step` without a `global_step` argument.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adam()
        >>> u, state = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 4) for x in u]  # the first step has magnitude ~1 per element
        [1.0, -1.0]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (the formula
      before section 2.1); Dozat, *Incorporating Nesterov momentum into Adam*, 2016.
    """
    fn = "scale_by_adam"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "nesterov", nesterov)
    _checks.check_bool(fn, "lazy", lazy)
    _checks.check_bool(fn, "use_global_step", use_global_step)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)

    def init_fn(params):
        zero = _tree.zero_count()
        return ScaleByAdamState(
            count=zero,
            m=_tree.zeros_like(params, mu_dtype),
            v=_tree.zeros_like(params),
            beta1_power=_tree.scalar(_tree.resolve(b1, zero)),
            beta2_power=_tree.scalar(_tree.resolve(b2, zero)),
        )

    def update_fn(updates, state, params=None, *, global_step=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_ = (_tree.scalar(_tree.resolve(h, state.count)) for h in (b1, b2, eps))
        if use_global_step:
            if global_step is None:
                raise _protocol.missing_extra_arg(
                    "scale_by_adam(use_global_step=True)", "global_step", "step"
                )
            t = _tree.scalar(jnp.asarray(global_step) + 1)  # AdamGS: cast(global_step + 1, float32)
            b1p, b2p = jnp.power(b1_, t), jnp.power(b2_, t)
        else:
            b1p, b2p = state.beta1_power, state.beta2_power
        c = jnp.sqrt(1 - b2p) / (1 - b1p)

        def dense_rule(g, m, v):
            b1v, b2v, cv, e = (_tree.like(x, g) for x in (b1_, b2_, c, eps_))
            m = _as_stored(_tree.moment_increment(m, g, b1v), m.dtype)
            v = _tree.moment_increment(v, g * g, b2v)
            return _adam_step(m, v, g, b1v, cv, e, nesterov), m, v

        def lazy_rule(g, m, v):
            b1v, b2v, cv, e = (_tree.like(x, g) for x in (b1_, b2_, c, eps_))
            m = _as_stored(_tree.moment_blend(m, g, b1v), m.dtype)
            v = _tree.moment_blend(v, g * g, b2v)
            return _adam_step(m, v, g, b1v, cv, e, False), m, v

        def leaf(g, m, v):
            out, new_m, new_v = rule(g, m, v)
            return out, new_m.astype(m.dtype), new_v  # stored in mu_dtype

        def rule(g, m, v):
            if not _tree.is_row_sparse(g):
                return dense_rule(g, m, v)
            if lazy:
                return sparse.apply_rows(lazy_rule, g, m, v)
            g = g.deduplicated()
            b1v, b2v, cv, e = (_tree.like(x, g.values) for x in (b1_, b2_, c, eps_))
            m = g.add_to_rows(m * b1v, g.values * (1 - b1v))
            v = g.add_to_rows(v * b2v, (g.values * g.values) * (1 - b2v))
            if nesterov:  # contrib Nadam: the variable moves on the touched rows only
                rows = _adam_step(g.gather(m), g.gather(v), g.values, b1v, cv, e, True)
                return g.with_values(g.zero_padding(rows)), m, v
            return _adam_step(m, v, None, b1v, cv, e, False), m, v

        out, m, v = _tree.split_map(
            fn, leaf, 3, updates, state.m, state.v, names=("updates", "state.m", "state.v")
        )
        return out, ScaleByAdamState(
            count=_tree.increment(state.count),
            m=m,
            v=v,
            beta1_power=_vma.typed_like((b1p * b1_).astype(state.beta1_power.dtype), state.beta1_power),
            beta2_power=_vma.typed_like((b2p * b2_).astype(state.beta2_power.dtype), state.beta2_power),
        )

    return _protocol.ElementWise(init_fn, update_fn)


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
            zero, _tree.zeros_like(params), _tree.zeros_like(params), _tree.scalar(_tree.resolve(b1, zero))
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_ = (_tree.scalar(_tree.resolve(h, state.count)) for h in (b1, b2, eps))
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
            m = _as_stored(_tree.moment_blend(m, g, b1v), m.dtype)
            v = jnp.maximum(v * b2v, jnp.abs(g))
            return step(m, v, e, cv), m, v

        def leaf(g, m, v):
            return sparse.apply_rows(rows_rule, g, m, v) if _tree.is_row_sparse(g) else dense_rule(g, m, v)

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
        steps = _tree.scalar(state.count + 1)

        def rule(g, m, v, v_hat):
            b1v, b2v, e = (_tree.like(x, g) for x in (b1_, b2_, eps_))
            m = b1v * m + (1 - b1v) * g
            v = b2v * v + (1 - b2v) * g * g
            v_hat = jnp.maximum(v_hat, v)
            u = m / (e + jnp.sqrt(v_hat))
            return (u / _tree.like(jnp.sqrt(steps), u) if decay else u), m, v, v_hat

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
