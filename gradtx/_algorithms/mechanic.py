"""Mechanic: a learned scale for any optimizer's steps (optax's numbers)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core import vma as _vma
from gradtx._core import walk as _walk
from gradtx._core.formulas import sq_norm, total_sum


class MechanizeState(NamedTuple):
    """State of `mechanize` (optax's `MechanicState` fields; the count first)."""

    count: _protocol.Count  # int32: completed updates
    base_optimizer_state: Any  # the base optimizer's state
    r: jax.Array  # [num_betas] the rewards of the bets, one per beta
    m: jax.Array  # [num_betas] the running maxima of |h|
    v: jax.Array  # [num_betas] the discounted sums of h^2
    s: jax.Array  # [num_betas] the scales; their sum multiplies the base updates
    x0: _protocol.Updates  # the params at the first step


def mechanic_transform(
    fn: str,
    base_optimizer: Any,
    weight_decay: Any,
    eps: Any,
    s_init: Any,
    num_betas: int,
    state_cls: Any = MechanizeState,
) -> _protocol.GradientTransformation:
    """`mechanize`'s transform with its state in `state_cls` (gradtx's class, or optax's field order)."""
    inner = _factory.member(base_optimizer)

    def make(count, inner_state, r, m, v, s, x0):
        return state_cls(count=count, base_optimizer_state=inner_state, r=r, m=m, v=v, s=s, x0=x0)

    def init_fn(params):
        dtype = _scalars.variables_dtype(jax.tree.leaves(params))
        r, m, v = (jnp.zeros([num_betas], dtype) for _ in range(3))  # three buffers (donation)
        s = jnp.ones([num_betas], dtype) * s_init
        x0 = jax.tree.map(jnp.copy, params)
        return make(_hyper.zero_count(), inner.init(params), r, m, v, s, x0)

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        _factory.refuse_complex(fn, updates, params, why="its bets are on real inner products")
        base_updates, inner_state = inner.update(updates, state.base_optimizer_state, params, **extra_args)
        dense = sparse.densify(updates)
        leaves, (ps, x0s, us), treedef = _walk.flatten_updates(
            fn,
            dense,
            params,
            state.x0,
            sparse.densify(base_updates),
            names=("updates", "params", "state.x0", "base"),
        )
        idx = [i for i, g in enumerate(leaves) if g is not None]
        first = state.count == 0  # the params actually used at the first step (not those given to init)
        x0s = [p if x0 is None else jnp.where(first, p, x0) for p, x0 in zip(ps, x0s, strict=True)]
        gs, ws, starts, steps = ([seq[i] for i in idx] for seq in (leaves, ps, x0s, us))
        s_sum = jnp.sum(state.s)
        grad_norm, param_norm = jnp.sqrt(sq_norm(gs)), jnp.sqrt(sq_norm(ws))
        gs = [
            g + weight_decay * s_sum * grad_norm / (param_norm + eps) * w for g, w in zip(gs, ws, strict=True)
        ]
        deltas_prev = [(x0 - w) / (s_sum + eps) for w, x0 in zip(ws, starts, strict=True)]
        h = total_sum([jnp.sum(g * d) for g, d in zip(gs, deltas_prev, strict=True)])
        clipped_h = jax.lax.clamp(-state.m, jnp.ones_like(state.m) * h, state.m)
        betas = jnp.array([1.0 - 0.1**i for i in range(1, num_betas + 1)], dtype=state.s.dtype)
        m = jnp.maximum(betas * state.m, jnp.abs(h) + eps)
        v = (betas**2) * state.v + h**2
        r = betas * state.r + clipped_h * state.s
        wealth = (s_init / num_betas) * m + jnp.maximum(0.0, r)
        s = wealth / (jnp.sqrt(v) + eps)
        out = list(leaves)
        for j, i in enumerate(idx):  # the new params x0 - sum(s) (delta_prev - base update), as a step
            new = starts[j] - jnp.sum(s) * (deltas_prev[j] - steps[j])
            out[i] = (new - ws[j]).astype(leaves[i].dtype)
        olds = (state.r, state.m, state.v, state.s)
        scalars = [
            _vma.typed_like(x.astype(old.dtype), old) for x, old in zip((r, m, v, s), olds, strict=True)
        ]
        new_x0 = treedef.unflatten(x0s)
        return treedef.unflatten(out), make(_hyper.increment(state.count), inner_state, *scalars, new_x0)

    return _factory.composite(init_fn, update_fn, inner)


@_registry.optimizer("Mechanic")
def mechanize(
    tx: _protocol.GradientTransformation,
    weight_decay: float = 1e-2,
    eps: float = 1e-8,
    s_init: float = 1e-6,
    num_betas: int = 6,
) -> _protocol.GradientTransformation:
    r"""Learn the scale of `tx`'s updates as the run goes (Mechanic, a learning-rate tuner).

    With :math:`\Delta_t` the sum of the base optimizer's updates so far (kept as
    :math:`(x_0 - x_t)/\sum_i s_{i}`), :math:`\beta_i = 1 - 10^{-i}` for
    :math:`i = 1 .. n`, the sums and norms over every element of every leaf:

    .. math::
        \tilde g_t = g_t + \lambda \textstyle\sum_i s_{t-1,i}\,
            \lVert g_t \rVert / (\lVert x_t \rVert + \epsilon)\, x_t,
        \quad h_t = \langle \tilde g_t, \Delta_{t-1} \rangle

        m_{t,i} = \max(\beta_i m_{t-1,i}, |h_t| + \epsilon), \quad
        v_{t,i} = \beta_i^2 v_{t-1,i} + h_t^2, \quad
        r_{t,i} = \beta_i r_{t-1,i} + \operatorname{clip}(h_t, \pm m_{t-1,i})\, s_{t-1,i}

        s_{t,i} = \big(s_{init} m_{t,i} / n + \max(0, r_{t,i})\big) / (\sqrt{v_{t,i}} + \epsilon),
        \quad x_{t+1} = x_0 - \textstyle\sum_i s_{t,i} (\Delta_{t-1} - u^{base}_t)

    The returned update is :math:`x_{t+1} - x_t`. Keep the base optimizer's learning rate
    (or schedule) at about 1: Mechanic learns the factor. :math:`x_0` is taken at the first
    step, so params loaded after `init` count. The numbers of `optax.contrib.mechanize`. It
    reads the params; a row-sparse gradient is densified (the base sees it as given). Its
    reductions are over all elements together: `ElementWise` when the base is.

    Args:
      tx: the base optimizer, whose updates are scaled (its rate about 1; optax's `base_optimizer`).
      weight_decay: :math:`\lambda`, Mechanic's own decay of the gradient it bets with, >= 0
        (numbers or scalar arrays here, not schedules).
      eps: :math:`\epsilon`, > 0.
      s_init: :math:`s_{init}`, the initial scale of each bet, > 0.
      num_betas: :math:`n`, the number of decays :math:`1 - 10^{-i}`, an int >= 1.

    Returns:
      A transform with state `MechanizeState(count, base_optimizer_state, r, m, v, s, x0)`.

    Raises:
      ValueError: for a negative decay, a non-positive `eps` or `s_init`, or `num_betas < 1`;
        at update time, if `params` is missing.
      TypeError: for a `tx` that is not a transform, a schedule or a non-int `num_betas`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.mechanize(gradtx.sgd(1.0), num_betas=3)
        >>> params = jnp.array([1.0, -2.0])
        >>> state = tx.init(params)
        >>> u, state = tx.update(params, state, params)
        >>> state.s.shape, int(state.count)
        ((3,), 1)

    References:
      Cutkosky, Defazio, Mehta, *Mechanic: a learning rate tuner*, NeurIPS 2023
      (arXiv:2306.00144).
    """
    fn = "mechanize"
    _checks.check_transform(fn, "tx", tx)
    for name, value in (("weight_decay", weight_decay), ("eps", eps), ("s_init", s_init)):
        _checks.check_number(fn, name, value)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_positive(fn, "eps", eps)
    _checks.check_positive(fn, "s_init", s_init)
    _checks.check_int(fn, "num_betas", num_betas, minimum=1)
    return mechanic_transform(fn, tx, weight_decay, eps, s_init, num_betas)


__all__ = ["MechanizeState", "mechanize"]
