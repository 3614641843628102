"""L-BFGS: `scale_by_lbfgs` and `lbfgs` (optax's numbers)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import tree
from gradtx._algorithms.linesearch import checked
from gradtx._algorithms.linesearch_zoom import scale_by_zoom_linesearch
from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._scale import scale, scale_by_learning_rate
from gradtx.combinators._stateless import identity


class ScaleByLBFGSState(NamedTuple):
    """State of `scale_by_lbfgs` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    params: Any  # the params of the last step
    updates: Any  # the updates (gradients) of the last step
    diff_params_memory: Any  # per param: (memory_size, *shape), the last differences of params
    diff_updates_memory: Any  # per param: (memory_size, *shape), the last differences of updates
    weights_memory: jax.Array  # (memory_size,): 1 / <dw, du> of each pair (0 for an empty one)


def _pair(memory, idx):
    weights, diff_params, diff_updates = memory
    return (weights[idx], *jax.tree.map(lambda x: x[idx], (diff_params, diff_updates)))


def _right(carry, idx):
    vec, memory = carry
    rho, dw, du = _pair(memory, idx)
    alpha = rho * tree.real(tree.vdot(dw, vec))
    return (tree.cast_like(tree.add_scale(vec, -alpha, du), vec), memory), alpha


def _left(carry, idx_alpha):
    vec, memory = carry
    idx, alpha = idx_alpha
    rho, dw, du = _pair(memory, idx)
    beta = rho * tree.real(tree.vdot(du, vec))
    return (tree.cast_like(tree.add_scale(vec, alpha - beta, dw), vec), memory), beta


def _precondition(updates, diff_params, diff_updates, weights, identity_scale, memory_idx):
    """The two-loop recursion (Nocedal & Wright, Algorithm 7.4): `updates` times the inverse Hessian estimate.

    The loops' bodies are module functions (the memory rides in the carry), so an eager `update` reuses
    their compiled scans."""
    memory_size = weights.shape[0]
    indices = (memory_idx + jnp.arange(memory_size)) % memory_size
    memory = (weights, diff_params, diff_updates)
    (vec, _), alphas = jax.lax.scan(_right, (updates, memory), indices, reverse=True)
    vec = tree.scale(identity_scale, vec)
    return jax.lax.scan(_left, (vec, memory), (indices, alphas))[0][0]


@_registry.transform()
def scale_by_lbfgs(
    memory_size: int = 10, *, scale_init_precond: bool = True
) -> _protocol.GradientTransformation:
    r"""Multiply the updates by L-BFGS's estimate of the inverse Hessian, from the last `memory_size` steps.

    .. math::
        P_{k,j+1} = V_j^\top P_{k,j} V_j + \rho_j\, \delta w_j \delta w_j^\top, \quad
        V_j = I - \rho_j\, \delta u_j \delta w_j^\top, \quad
        \rho_j = 1 / \langle \delta u_j, \delta w_j\rangle, \quad P_{k,k-m} = \gamma_k I

    for :math:`j = k-m, \dots, k-1`, with :math:`\delta w_j = w_{j+1} - w_j` and
    :math:`\delta u_j = u_{j+1} - u_j` the differences of params and updates;
    :math:`\gamma_k = \langle \delta w_{k-1}, \delta u_{k-1}\rangle / \|\delta u_{k-1}\|^2`
    with `scale_init_precond` (else 1), and :math:`\min(1, 1/\|u_0\|)` at the first step
    (a first step of length at most 1). The output is the direction :math:`P_k u_k`; chain a
    sign flip and a line search after it (`lbfgs`). The memory is updated with the params and
    updates `update` is given, so a line search that follows sees the new estimate. Complex
    params are supported. A row-sparse gradient is densified. The numbers of
    `optax.scale_by_lbfgs`.

    Args:
      memory_size: the number of past differences kept, >= 1.
      scale_init_precond: scale the initial estimate by :math:`\gamma_k` (else the identity).

    Returns:
      A transform (leaf-wise on packed params) with state `ScaleByLBFGSState`.

    Raises:
      ValueError: if `memory_size` < 1.
      TypeError: for a non-int `memory_size` or a non-bool `scale_init_precond`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_lbfgs()
        >>> w = jnp.array([3.0, 4.0])
        >>> tx.update(w, tx.init(w), w)[0]  # step 1: the gradient scaled to norm 1
        Array([0.6, 0.8], dtype=float32)

    References:
      Nocedal & Wright, *Numerical Optimization*, 1999 (Algorithms 7.4, 7.5); Liu & Nocedal,
      *On the limited memory BFGS method for large scale optimization*, Math. Prog. 1989.
    """
    fn = "scale_by_lbfgs"
    _checks.check_int(fn, "memory_size", memory_size, minimum=1)
    _checks.check_bool(fn, "scale_init_precond", scale_init_precond)
    fn = _checks.api_name(fn)

    def init_fn(params):
        return ScaleByLBFGSState(
            count=_hyper.zero_count(),
            params=_placement.zeros_like(params),
            updates=_placement.zeros_like(params),
            diff_params_memory=jax.tree.map(lambda p: _placement.stacked(p, memory_size), params),
            diff_updates_memory=jax.tree.map(lambda p: _placement.stacked(p, memory_size), params),
            weights_memory=jnp.zeros(memory_size),
        )

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise _protocol.missing_params(fn)
        slots = {"params": (state.params, None), "updates": (state.updates, None)}
        slots.update(diff_params_memory=(state.diff_params_memory, memory_size))
        slots.update(diff_updates_memory=(state.diff_updates_memory, memory_size))
        updates = checked(fn, updates, params, slots)
        memory_idx = state.count % memory_size
        prev_idx = (state.count - 1) % memory_size
        # 1. the memory takes the last step's differences (none before the first step)
        diff_params = tree.sub(params, state.params)
        diff_updates = tree.sub(updates, state.updates)
        curvature = tree.real(tree.vdot(diff_updates, diff_params))
        weight = jnp.where(curvature == 0.0, 0.0, 1.0 / curvature)
        diff_params, diff_updates, weight = jax.tree.map(
            lambda x: jnp.where(state.count > 0, x, jnp.zeros_like(x)), (diff_params, diff_updates, weight)
        )
        memories = jax.tree.map(
            lambda x, y: x.at[prev_idx].set(y.astype(x.dtype)),
            (state.diff_params_memory, state.diff_updates_memory, state.weights_memory),
            (diff_params, diff_updates, weight),
        )
        # 2. the scale of the initial estimate (gamma_k)
        identity_scale: Any = 1.0
        if scale_init_precond:
            numerator = tree.real(tree.vdot(diff_updates, diff_params))
            denominator = tree.norm(diff_updates, squared=True)
            identity_scale = jnp.where(denominator > 0.0, numerator / denominator, 1.0)
            capped_inv_norm = jnp.minimum(1.0, 1.0 / tree.norm(jax.lax.stop_gradient(updates)))
            identity_scale = jnp.where(state.count > 0, identity_scale, capped_inv_norm)
        # 3. the direction P_k u_k
        direction = _precondition(updates, *memories, identity_scale, memory_idx)
        new_state = ScaleByLBFGSState(_hyper.increment(state.count), params, updates, *memories)
        return tree.cast_like(direction, updates), new_state

    return _protocol.GradientTransformation(init_fn, update_fn)


ZOOM = "zoom"
"""`lbfgs`'s default line search: `scale_by_zoom_linesearch(20, initial_guess_strategy="one")` (optax's)."""


@_registry.optimizer("LBFGS")
def lbfgs(
    learning_rate: _protocol.ScalarOrSchedule | None = None,
    memory_size: int = 10,
    *,
    scale_init_precond: bool = True,
    linesearch: Any = ZOOM,
) -> _protocol.GradientTransformation:
    r"""L-BFGS: the quasi-Newton direction from the last `memory_size` steps, its step size by a line search.

    `chain(scale_by_lbfgs(memory_size, scale_init_precond=...), scale(-1) or
    scale_by_learning_rate(learning_rate), linesearch)`: the numbers and defaults of
    `optax.lbfgs`. The default line search is the zoom search of the strong Wolfe conditions
    (`scale_by_zoom_linesearch(20, initial_guess_strategy="one")`), which needs the
    objective: call `update(grads, state, params, value=v, grad=g, value_fn=f)` (`value` and
    `grad` are computed from `f` when not given, and `value_and_grad_from_state(f)` reuses
    the ones the line search kept). For deterministic objectives of small to medium size
    (the memory holds `2 * memory_size` copies of the params).

    Args:
      learning_rate: a fixed step size (number, scalar array or schedule) in place of the one
        the line search finds, or None (a step of 1 along the direction, before the search).
      memory_size: the number of past differences kept, >= 1.
      scale_init_precond: scale the initial inverse Hessian estimate (see `scale_by_lbfgs`).
      linesearch: a line search transform (`scale_by_zoom_linesearch`,
        `scale_by_backtracking_linesearch`), `"zoom"` for the default one, or None for none.

    Returns:
      A chain with state `(ScaleByLBFGSState, EmptyState, line search state)`.

    Raises:
      ValueError: for `memory_size` < 1 or a negative rate.
      TypeError: for a `linesearch` that is not a transform.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> f = lambda w: jnp.sum((w - 1.0) ** 2)
        >>> tx, w = gradtx.lbfgs(), jnp.zeros(3)
        >>> state = tx.init(w)
        >>> for _ in range(2):
        ...     u, state = tx.update(jax.grad(f)(w), state, w, value_fn=f)
        ...     w = gradtx.apply_updates(w, u)
        >>> w
        Array([1., 1., 1.], dtype=float32)

    References:
      Nocedal & Wright, *Numerical Optimization*, 1999 (Algorithms 7.4, 7.5); Liu & Nocedal,
      *On the limited memory BFGS method for large scale optimization*, Math. Prog. 1989.
    """
    fn = "lbfgs"
    if learning_rate is not None:
        _checks.check_learning_rate(fn, learning_rate)
    if isinstance(linesearch, str):
        _checks.check_one_of(fn, "linesearch", linesearch, (ZOOM,))
        linesearch = scale_by_zoom_linesearch(20, initial_guess_strategy="one")
    elif linesearch is not None:
        _checks.check_transform(fn, "linesearch", linesearch)
    return chain(
        scale_by_lbfgs(memory_size, scale_init_precond=scale_init_precond),
        scale(-1.0) if learning_rate is None else scale_by_learning_rate(learning_rate),
        identity() if linesearch is None else linesearch,
    )


__all__ = ["ScaleByLBFGSState", "lbfgs", "scale_by_lbfgs"]
