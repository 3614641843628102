"""MoMo and MoMo-Adam: model-based momentum (optax's numbers)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import docs as _docs
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import rule_parts as _rule_parts
from gradtx._core import sliced as _sliced
from gradtx._core import walk as _walk


class MomoState(NamedTuple):
    """State of `momo` (optax's `MomoState`, field for field: the count last)."""

    exp_avg: _protocol.Updates  # the moving average of the gradients
    barf: jax.Array  # the moving average of the loss values
    gamma: jax.Array  # the moving average of <g, w>
    lb: jax.Array  # the lower bound of the loss (adapted with `adapt_lower_bound`)
    count: _protocol.Count  # int32: completed updates


class MomoAdamState(NamedTuple):
    """State of `momo_adam` (optax's `MomoAdamState`, field for field: the count last)."""

    exp_avg: _protocol.Updates  # the moving average of the gradients
    exp_avg_sq: _protocol.Updates  # the moving average of the squared gradients
    barf: jax.Array  # the moving average of the loss values
    gamma: jax.Array  # the moving average of <g, w>
    lb: jax.Array  # the lower bound of the loss (adapted with `adapt_lower_bound`)
    count: _protocol.Count  # int32: completed updates


def _vdot(a: Any, b: Any) -> Any:
    """The inner product of two trees (None leaves skipped), summed leaf by leaf in order (optax's); on
    ZeRO's slices, the replicas' partial sums summed (`_sliced.total`)."""
    return _sliced.total(_total([jnp.sum(x * y) for x, y in _pairs(a, b)]))  # no contraction: no out_sharding


def _total(sums: list[Any]) -> Any:
    """`0 + s_1 + s_2 + ...` in order (optax's `jax.tree.reduce(operator.add, ..., initializer=0)`)."""
    total: Any = 0
    for s in sums:
        total = total + s
    return total


def _pairs(a: Any, b: Any) -> list[tuple[Any, Any]]:
    return [(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True) if x is not None]


def _lowest_dtype(params: Any) -> Any:
    """The narrowest floating dtype of the params (optax's `tree.dtype(params, "lowest")`)."""
    dtypes = [d for x in jax.tree.leaves(params) if jnp.issubdtype(d := jnp.result_type(x), jnp.inexact)]
    dtypes = dtypes or [jnp.dtype(jnp.float32)]
    return min(dtypes, key=lambda d: jnp.finfo(d).bits)


def _check(fn: str, learning_rate: Any, weight_decay: Any, lower_bound: Any, adapt_lower_bound: Any) -> None:
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_finite(fn, "lower_bound", lower_bound)
    _checks.check_bool(fn, "adapt_lower_bound", adapt_lower_bound)


def _momo(fn, learning_rate, b1, b2, eps, lower_bound, weight_decay, adapt_lower_bound):
    """MoMo (`b2` None) or MoMo-Adam: the transform."""
    adam = b2 is not None

    def init_fn(params):
        dtype = _lowest_dtype(params)
        zeros = _walk.map_updates(fn, lambda p: _placement.filled(p, 0.0, p.dtype), params)
        scalars = (jnp.zeros([], dtype), jnp.zeros([], dtype))
        lb = jnp.asarray(_hyper.resolve(lower_bound, _hyper.zero_count()), dtype)
        if adam:
            return MomoAdamState(
                zeros,
                _walk.map_updates(fn, lambda p: _placement.filled(p, 0.0, p.dtype), params),
                *scalars,
                lb,
                _hyper.zero_count(),
            )
        return MomoState(zeros, *scalars, lb, _hyper.zero_count())

    def update_fn(updates, state, params=None, *, value=None, **extra_args):
        del extra_args
        if params is None:
            raise _protocol.missing_params(fn)
        if value is None:
            raise _protocol.missing_extra_arg(fn, "value", "loss")  # jax.value_and_grad gives both
        _factory.refuse_complex(fn, updates, params, why="its step size is a real inner product")
        leaves, treedef = jax.tree.flatten(updates, is_leaf=_walk.is_update_leaf)
        _rule_parts.refuse_integers(fn, updates, leaves, treedef, params, None)
        g = sparse.densify(updates)
        count = state.count
        t = _hyper.increment(count)
        alpha, wd, lower = (_hyper.resolve(v, count) for v in (learning_rate, weight_decay, lower_bound))
        beta = _hyper.resolve(b1, count)
        bt = beta if adam else jnp.where(count == 0, 0.0, beta)  # MoMo starts at the first gradient
        barf = bt * state.barf + (1 - bt) * jnp.asarray(value, state.barf.dtype)
        exp_avg = _walk.map_updates(fn, lambda g_, m: bt * m + (1 - bt) * g_, g, state.exp_avg)
        gamma = bt * state.gamma + (1 - bt) * _vdot(g, params)
        iprod = _vdot(exp_avg, params)
        if adam:
            beta2, e = _hyper.resolve(b2, count), _hyper.resolve(eps, count)
            exp_avg_sq = _walk.map_updates(
                fn, lambda g_, v: beta2 * v + (1 - beta2) * g_ * g_, g, state.exp_avg_sq
            )
            bc2 = jnp.asarray(1 - beta2**t, barf.dtype)
            precond = _walk.map_updates(fn, lambda v: e + jnp.sqrt(v / bc2), exp_avg_sq)
            direction = _walk.map_updates(fn, lambda m, p: m / p, exp_avg, precond)
            sq_norm = _vdot(exp_avg, direction)
            bc1 = jnp.asarray(1 - beta**t, barf.dtype)
        else:
            sq_norm = _sliced.total(
                _total([jnp.sum(jnp.square(m)) for m in jax.tree.leaves(exp_avg) if m is not None])
            )
            bc1 = 1
        decay = 1 + alpha * wd
        if adapt_lower_bound:
            cap = decay * (barf - gamma) + iprod
            this_lb = jnp.where(
                cap < decay * bc1 * state.lb, jnp.maximum(cap / (2 * bc1 * decay), lower), state.lb
            )
        else:
            this_lb = state.lb
        t1 = jnp.maximum(decay * (barf - bc1 * this_lb - gamma) + iprod, 0.0) / sq_norm
        t1 = jnp.where(sq_norm <= jnp.finfo(float).eps, 0.0, t1)  # no step on a zero direction
        tau = jnp.minimum(alpha / bc1, t1)

        def step(m, p, precond=None):  # optax's order: `tau * m / precond`, not `tau * (m / precond)`
            return -(alpha * wd) / decay * p - (tau * m if precond is None else tau * m / precond)

        out = _walk.map_updates(fn, step, exp_avg, params, *((precond,) if adam else ()))
        lb = state.lb
        if adapt_lower_bound:
            lb = jnp.maximum(((barf + iprod - gamma) - (1 / 2) * tau * sq_norm) / bc1, lower)
        lb = jnp.asarray(lb, state.lb.dtype)
        if adam:
            return out, MomoAdamState(exp_avg, exp_avg_sq, barf, gamma, lb, t)
        return out, MomoState(exp_avg, barf, gamma, lb, t)

    # its inner products are the whole tree's on ZeRO's slices too (`_vdot`); `api` gives it per-leaf views
    return _protocol.SliceWise(init_fn, update_fn)


_ARGS = """learning_rate: :math:`\\alpha`, the largest step size, >= 0 (number, scalar array or schedule).
      {betas}
      lower_bound: :math:`f_*`, a lower bound of the loss (0 for most losses).
      weight_decay: :math:`\\lambda`, >= 0 (decoupled, scaled by the step size).
      adapt_lower_bound: estimate the lower bound on the fly (the paper's MoMo*), from `lower_bound` up."""


@_registry.optimizer("MoMo")
def momo(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    beta: _protocol.ScalarOrSchedule = 0.9,
    lower_bound: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    adapt_lower_bound: bool = False,
) -> _protocol.GradientTransformation:
    r"""MoMo: momentum SGD whose step size is a Polyak step on a model of the loss, capped at `learning_rate`.

    With :math:`f_t` the loss `value` passed to `update` (required: `jax.value_and_grad`),
    averages :math:`\bar f_t, d_t, \gamma_t` of :math:`f, g, \langle g, w\rangle` (decay
    :math:`\beta`, started at the first step's values) and :math:`\delta = 1 + \alpha\lambda`:

    .. math::
        \tau_t = \min\Big(\alpha, \frac{\big(\delta(\bar f_t - f_* - \gamma_t)
                 + \langle d_t, w_t\rangle\big)_+}{\lVert d_t\rVert^2}\Big), \qquad
        u_t = -\frac{\alpha\lambda}{\delta} w_t - \tau_t d_t

    (no step while :math:`\lVert d_t\rVert^2` is below float64's epsilon). The step size is one
    number over all leaves. A full optimizer: no learning rate follows it. The numbers of
    `optax.contrib.momo`; the scalars are kept in the params' narrowest dtype. A row-sparse
    gradient is densified first.

    Args:
      {ARGS}

    Returns:
      A `SliceWise` transform with state `MomoState(exp_avg, barf, gamma, lb, count)`
        (`parallel.sharded_state` runs it on ZeRO's slices, its inner products the whole tree's;
        pass the replicas' mean loss there, `parallel.mean_over(value, axis_name)`).

    Raises:
      ValueError: for a negative rate or weight decay, a beta outside [0, 1) or a non-finite
        lower bound; at update time, if `params` is missing.
      TypeError: for a non-bool `adapt_lower_bound`, complex params (when traced);
        `MissingExtraArgError` (when traced) without `value`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.momo()
        >>> params = jnp.array([1.0, 2.0, 3.0])
        >>> value, grad = jax.value_and_grad(lambda w: jnp.sum(w**2))(params)
        >>> u, state = tx.update(grad, tx.init(params), params, value=value)
        >>> params + u  # tau = min(1, (14 - 0 - 28 + 28) / 56) = 1/4: w - w / 2
        Array([0.5, 1. , 1.5], dtype=float32)

    References:
      Schaipp, Ohana, Eickenberg, Defazio, Gower, *MoMo: momentum models for adaptive learning
      rates*, ICML 2024 (arXiv:2305.07583), Algorithm 1.
    """
    fn = "momo"
    _check(fn, learning_rate, weight_decay, lower_bound, adapt_lower_bound)
    _checks.check_in_range(fn, "beta", beta, 0.0, 1.0, high_open=True)
    return _momo(fn, learning_rate, beta, None, None, lower_bound, weight_decay, adapt_lower_bound)


@_registry.optimizer("MoMoAdam")
def momo_adam(
    learning_rate: _protocol.ScalarOrSchedule = 1e-2,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    lower_bound: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    adapt_lower_bound: bool = False,
) -> _protocol.GradientTransformation:
    r"""MoMo-Adam: Adam(W) whose step size is a Polyak step on a model of the loss, capped at `learning_rate`.

    As `momo`, in Adam's geometry: with :math:`D_t = \epsilon + \sqrt{v_t / (1-\beta_2^t)}`
    (Adam's second moment :math:`v_t`), :math:`c_t = 1-\beta_1^t` and the averages
    :math:`\bar f_t, d_t, \gamma_t` (decay :math:`\beta_1`, from 0):

    .. math::
        \tau_t = \min\Big(\frac{\alpha}{c_t}, \frac{\big(\delta(\bar f_t - c_t f_* - \gamma_t)
                 + \langle d_t, w_t\rangle\big)_+}{\langle d_t, d_t / D_t\rangle}\Big), \qquad
        u_t = -\frac{\alpha\lambda}{\delta} w_t - \tau_t\, d_t / D_t

    The numbers of `optax.contrib.momo_adam`. A row-sparse gradient is densified first.

    Args:
      {ARGS}

    Returns:
      A `SliceWise` transform with state `MomoAdamState(exp_avg, exp_avg_sq, barf, gamma, lb, count)`
        (`parallel.sharded_state` runs it on ZeRO's slices, its inner products the whole tree's;
        pass the replicas' mean loss there, `parallel.mean_over(value, axis_name)`).

    Raises:
      ValueError: for a negative rate, `eps` or weight decay, a beta outside [0, 1) or a
        non-finite lower bound; at update time, if `params` is missing.
      TypeError: for a non-bool `adapt_lower_bound`, complex params (when traced);
        `MissingExtraArgError` (when traced) without `value`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.momo_adam(learning_rate=0.5)
        >>> params = jnp.array([1.0, 2.0, 3.0])
        >>> value, grad = jax.value_and_grad(lambda w: jnp.sum(w**2))(params)
        >>> u, state = tx.update(grad, tx.init(params), params, value=value)
        >>> (params + u).round(4)  # tau capped at 0.5 / (1 - b1): a step of 0.5 along -sign(g)
        Array([0.5, 1.5, 2.5], dtype=float32)

    References:
      Schaipp, Ohana, Eickenberg, Defazio, Gower, *MoMo: momentum models for adaptive learning
      rates*, ICML 2024 (arXiv:2305.07583), Algorithm 2.
    """
    fn = "momo_adam"
    _check(fn, learning_rate, weight_decay, lower_bound, adapt_lower_bound)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    return _momo(fn, learning_rate, b1, b2, eps, lower_bound, weight_decay, adapt_lower_bound)


for _f, _betas in (
    (momo, "beta: :math:`\\beta`, the decay of the averages, in [0, 1)."),
    (
        momo_adam,
        "b1: :math:`\\beta_1`, the decay of the averages, in [0, 1).\n      b2: :math:`\\beta_2`, the decay "
        "of Adam's second moment, in [0, 1).\n      eps: :math:`\\epsilon`, added to its root, >= 0.",
    ),
):
    _docs.sections(ARGS=_ARGS.format(betas=_betas))(_f)


__all__ = ["MomoAdamState", "MomoState", "momo", "momo_adam"]
