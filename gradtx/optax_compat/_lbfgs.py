"""optax's L-BFGS and line searches under optax's names, signatures and defaults (no math here).

`lbfgs`, `scale_by_lbfgs`, `scale_by_zoom_linesearch`, `scale_by_backtracking_linesearch`
and `value_and_grad_from_state` are gradtx's (whose states have optax's layouts: `state[0]`
is a `ScaleByLBFGSState`, `state[2].info` a `ZoomLinesearchInfo`), with optax's positional
flags. Beyond optax: `update` computes `value` and `grad` from `value_fn` when they are not
given, and ignores extra arguments that `value_fn` does not take (optax raises TypeError).
For complex params the zoom search's first slope is optax's (see `zoom_linesearch`), which
`gradtx.scale_by_zoom_linesearch` corrects.
"""

from __future__ import annotations

from typing import Any

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import (
    BacktrackingLinesearchInfo,
    ScaleByBacktrackingLinesearchState,
    ScaleByLBFGSState,
    ScaleByZoomLinesearchState,
    ZoomLinesearchInfo,
    value_and_grad_from_state,
)
from gradtx.combinators._linesearch_zoom import zoom_linesearch

__all__ = [
    "BacktrackingLinesearchInfo",
    "ScaleByBacktrackingLinesearchState",
    "ScaleByLBFGSState",
    "ScaleByZoomLinesearchState",
    "ZoomLinesearchInfo",
    "lbfgs",
    "scale_by_backtracking_linesearch",
    "scale_by_lbfgs",
    "scale_by_zoom_linesearch",
    "value_and_grad_from_state",
]


@_factory.api
def scale_by_lbfgs(
    memory_size: int = 10, scale_init_precond: bool = True
) -> _protocol.GradientTransformation:
    """optax's `scale_by_lbfgs`: `gradtx.scale_by_lbfgs` (state `ScaleByLBFGSState`).

    Args:
      memory_size: the number of past differences kept, >= 1.
      scale_init_precond: scale the initial inverse Hessian estimate.

    Returns:
      A `GradientTransformation`, state as optax's.

    Raises:
      ValueError: if `memory_size` < 1.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx, w = optax.scale_by_lbfgs(), jnp.array([3.0, 4.0])
        >>> tx.update(w, tx.init(w), w)[0]
        Array([0.6, 0.8], dtype=float32)
    """
    return gradtx.scale_by_lbfgs(memory_size, scale_init_precond=scale_init_precond)


@_factory.api
def scale_by_zoom_linesearch(
    max_linesearch_steps: int,
    max_learning_rate: Any = None,
    tol: Any = 0.0,
    increase_factor: Any = 2.0,
    slope_rtol: Any = 1e-4,
    curv_rtol: Any = 0.9,
    approx_dec_rtol: Any = 1e-6,
    stepsize_precision: Any = 1e-5,
    initial_guess_strategy: str = "keep",
    verbose: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_zoom_linesearch`: `gradtx.scale_by_zoom_linesearch`'s search, optax's first slope.

    Args:
      max_linesearch_steps: the most evaluations of the objective per step.
      **kwargs: as optax's `scale_by_zoom_linesearch` (same names, order and defaults).

    Returns:
      A `GradientTransformation`, state as optax's; `update` takes `value`, `grad`, `value_fn`.

    Raises:
      ValueError: for arguments out of range (named, with the value given).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> f = lambda w: jnp.sum(w**2)
        >>> tx, w = optax.chain(optax.sgd(1.0), optax.scale_by_zoom_linesearch(15)), jnp.array([1.0, 2.0])
        >>> u, _ = tx.update(2 * w, tx.init(w), w, value=f(w), grad=2 * w, value_fn=f)
        >>> optax.apply_updates(w, u)
        Array([0., 0.], dtype=float32)
    """
    return zoom_linesearch(
        max_linesearch_steps, max_learning_rate, tol, increase_factor, slope_rtol, curv_rtol, approx_dec_rtol,
        stepsize_precision, initial_guess_strategy, verbose, optax_start_slope=True,
    )  # fmt: skip


@_factory.api
def scale_by_backtracking_linesearch(
    max_backtracking_steps: int,
    slope_rtol: Any = 1e-4,
    decrease_factor: Any = 0.8,
    increase_factor: Any = 1.5,
    max_learning_rate: Any = 1.0,
    atol: Any = 0.0,
    rtol: Any = 0.0,
    store_grad: bool = False,
    verbose: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_backtracking_linesearch`: `gradtx.scale_by_backtracking_linesearch`.

    Args:
      max_backtracking_steps: the most evaluations of the objective per step.
      **kwargs: as optax's `scale_by_backtracking_linesearch` (same names, order and defaults).

    Returns:
      A `GradientTransformation`, state `ScaleByBacktrackingLinesearchState` as optax's.

    Raises:
      ValueError: for arguments out of range (named, with the value given).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> f = lambda w: jnp.sum(w**2)
        >>> tx = optax.chain(optax.sgd(1.0), optax.scale_by_backtracking_linesearch(15))
        >>> w = jnp.array([1.0, 2.0])
        >>> u, _ = tx.update(2 * w, tx.init(w), w, value=f(w), grad=2 * w, value_fn=f)
        >>> optax.apply_updates(w, u)
        Array([-0.6, -1.2], dtype=float32)
    """
    return gradtx.scale_by_backtracking_linesearch(
        max_backtracking_steps, slope_rtol, decrease_factor, increase_factor, max_learning_rate, atol, rtol,
        store_grad=store_grad, verbose=verbose,
    )  # fmt: skip


@_factory.api
def lbfgs(
    learning_rate: Any = None,
    memory_size: int = 10,
    scale_init_precond: bool = True,
    linesearch: Any = scale_by_zoom_linesearch(max_linesearch_steps=20, initial_guess_strategy="one"),  # noqa: B008
) -> _protocol.GradientTransformation:
    """optax's `lbfgs`: `chain(scale_by_lbfgs, scale(-1) or scale_by_learning_rate, linesearch or identity)`.

    Args:
      learning_rate: a fixed step size in place of the line search's, or None.
      memory_size: the number of past differences kept, >= 1.
      scale_init_precond: scale the initial inverse Hessian estimate.
      linesearch: the line search (optax's default: a zoom search of at most 20 steps
        starting at 1), or None for none.

    Returns:
      A `GradientTransformation`, state as optax's; `update` takes `value`, `grad`, `value_fn`.

    Raises:
      ValueError: for `memory_size` < 1.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> f = lambda w: jnp.sum(w**2)
        >>> solver, w = optax.lbfgs(), jnp.array([1.0, 2.0, 3.0])
        >>> state = solver.init(w)
        >>> value_and_grad = optax.value_and_grad_from_state(f)
        >>> for _ in range(2):
        ...     value, grad = value_and_grad(w, state=state)
        ...     u, state = solver.update(grad, state, w, value=value, grad=grad, value_fn=f)
        ...     w = optax.apply_updates(w, u)
        >>> print(f"{float(f(w)):.2E}")
        7.46E-14
    """
    return gradtx.lbfgs(
        learning_rate, memory_size, scale_init_precond=scale_init_precond, linesearch=linesearch
    )
