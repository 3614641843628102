"""L-BFGS as optax writes it: `chain(scale_by_lbfgs, -learning rate, line search)`, optax's numbers."""

from __future__ import annotations

from typing import Any

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import chain, identity, scale_by_lbfgs, scale_by_zoom_linesearch
from gradtx.transforms import scale, scale_by_learning_rate

ZOOM = "zoom"
"""`lbfgs`'s default line search: `scale_by_zoom_linesearch(20, initial_guess_strategy="one")` (optax's)."""


@_factory.api
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
