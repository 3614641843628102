"""The backtracking line search and `value_and_grad_from_state` (optax's numbers)."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import tree
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import rule_parts as _leaves
from gradtx._core import walk as _walk


class BacktrackingLinesearchInfo(NamedTuple):
    """What the last backtracking search did (optax's fields)."""

    num_linesearch_steps: jax.Array  # int: evaluations of the objective
    decrease_error: jax.Array  # how far the accepted step misses sufficient decrease (0: it does not)


class ScaleByBacktrackingLinesearchState(NamedTuple):
    """State of `scale_by_backtracking_linesearch` (optax's layout)."""

    learning_rate: jax.Array  # the step size found last (the next search starts from it)
    value: jax.Array  # the objective at the accepted step (read by `value_and_grad_from_state`)
    grad: Any  # its gradient with `store_grad`, else None
    info: BacktrackingLinesearchInfo


class _Backtrack(NamedTuple):
    learning_rate: jax.Array
    new_value: jax.Array
    new_grad: Any
    decrease_error: jax.Array
    iter_num: jax.Array


def check_number(fn: str, name: str, value: Any) -> None:
    """A line search's numeric argument: a number or scalar array (it keeps no count: no schedules)."""
    if _checks.is_schedule(value):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `{name}` must be a number or a scalar array (a line search keeps no "
            f"step count, so it takes no schedule), got {value!r}."
        )
    _checks.check_number(fn, name, value)


def value_dtype(params: Any) -> Any:
    """The dtype of the objective's value and step sizes: the real dtype of the first parameter (optax's)."""
    leaves = jax.tree.leaves(params)
    dtype = jnp.result_type(leaves[0]) if leaves else None
    return (
        _formulas.real_dtype(dtype)
        if dtype is not None and jnp.issubdtype(dtype, jnp.inexact)
        else float_dtype()
    )


def float_dtype() -> Any:
    """The default float dtype (float32; float64 with x64)."""
    return jnp.asarray(0.0).dtype


def checked(fn: str, updates: Any, params: Any, slots: dict[str, tuple[Any, int | None]]) -> Any:
    """The densified updates, checked at trace time: no integer gradient or parameter, and each slot tree
    (`{field: (tree, leading)}`) shaped like the updates (with a leading axis of size `leading`)."""
    updates = densified(updates)
    leaves, treedef = jax.tree.flatten(updates, is_leaf=_leaves.is_none)
    _leaves.refuse_integers(fn, updates, leaves, treedef, params, None)
    for field, (slot_tree, leading) in slots.items():
        if slot_tree is None:
            continue
        for i, (g, slot) in enumerate(
            zip(leaves, _leaves.flatten_up_to(fn, treedef, updates, slot_tree, field), strict=True)
        ):
            if g is not None:
                shape = _leaves.shape_of(g)
                _leaves.check_slot(
                    fn, g, slot, field, updates, i, shape if leading is None else (leading, *shape)
                )
    return updates


def strong(value: Any) -> jax.Array:
    """`jnp.asarray(value)` in its default dtype, not weakly typed (a state leaf keeps its type)."""
    return jnp.asarray(value, jnp.asarray(value).dtype)


def densified(updates: Any) -> Any:
    """The updates with row-sparse leaves densified (a line search steps along the whole direction)."""
    return jax.tree.map(_leaves.dense, updates, is_leaf=_walk.is_row_sparse)


def fn_kwargs(value_fn: Callable[..., Any], extra_args: dict[str, Any]) -> dict[str, Any]:
    """The extra arguments that `value_fn`'s signature names (as optax's `_extract_fns_kwargs`)."""
    names = inspect.signature(value_fn).parameters
    return {k: v for k, v in extra_args.items() if k in names}


def objective(
    fn: str, updates: Any, state: Any, params: Any, value: Any, grad: Any, value_fn: Any, extra_args: dict
) -> tuple[Any, Any, Any, Callable[..., Any]]:
    """`(updates, value, grad, f)` for a line search's step: the densified direction, the objective's value
    and gradient at `params` (computed with `value_fn` where not given) and `f = value_fn(., **kwargs)`.

    Raises:
      MissingExtraArgError: without `value_fn`.
      ValueError: without `params`.
      TypeError: for an integer gradient or parameter.
    """
    if value_fn is None:
        raise _protocol.missing_extra_arg(fn, "value_fn", "loss_fn")
    if params is None:
        raise _protocol.missing_params(fn)
    updates = checked(fn, updates, params, {"grad": (state.grad, None)})
    f = functools.partial(value_fn, **fn_kwargs(value_fn, extra_args))
    if value is None or grad is None:
        v, g = jax.value_and_grad(f)(params)
        value, grad = (v if value is None else value), (g if grad is None else grad)
    return updates, value, grad, f


def cond_print(condition: Any, message: str, **kwargs: Any) -> None:
    """Print `message` (formatted with `kwargs` by `jax.debug.print`) where `condition` holds."""
    jax.lax.cond(condition, lambda: jax.debug.print(message, **kwargs, ordered=True), lambda: None)


@_registry.transform()
def scale_by_backtracking_linesearch(
    max_backtracking_steps: int,
    slope_rtol: Any = 1e-4,
    decrease_factor: Any = 0.8,
    increase_factor: Any = 1.5,
    max_learning_rate: Any = 1.0,
    atol: Any = 0.0,
    rtol: Any = 0.0,
    *,
    store_grad: bool = False,
    verbose: bool = False,
) -> _protocol.GradientTransformation:
    r"""Scale the direction by a step size that decreases the objective enough (Armijo backtracking).

    .. math::
        f(w + \eta u) \le (1 + \delta) f(w) + \eta\, c \,\mathrm{Re}\langle u, \nabla f(w)\rangle + \epsilon

    with :math:`c` = `slope_rtol`, :math:`\delta` = `rtol`, :math:`\epsilon` = `atol`. The search
    starts at :math:`\min(\text{increase\_factor} \cdot \eta_{prev}, \text{max\_learning\_rate})`
    and multiplies it by `decrease_factor` until the condition holds or
    `max_backtracking_steps` evaluations are spent; a step whose objective is never finite
    becomes 0. The direction must be a descent direction (e.g. after `scale_by_learning_rate`
    or `scale(-1)`). `update(updates, state, params, value_fn=f, value=f(params),
    grad=grad_f(params), **kwargs)`: `value` and `grad` are computed from `f` when not given;
    the extra arguments that `f`'s signature names are passed on to it (a batch), the others
    ignored. The numbers of `optax.scale_by_backtracking_linesearch`.

    Args:
      max_backtracking_steps: the most evaluations of the objective per step, >= 0.
      slope_rtol: the fraction of the linear decrease required, in [0, 1) (from 1 on, no step
        of a smooth objective can satisfy the condition near its start).
      decrease_factor: the factor a rejected step size is multiplied by, in (0, 1).
      increase_factor: the factor the last step size is multiplied by to start a search, > 0.
      max_learning_rate: the largest step size, > 0.
      atol: the absolute tolerance of the condition, >= 0.
      rtol: the relative tolerance of the condition, >= 0.
      store_grad: also compute the gradient at the accepted step and keep it in the state
        (`value_and_grad_from_state` then reuses it).
      verbose: print a diagnostic when the search fails.

    Returns:
      A transform (leaf-wise on packed params) with state `ScaleByBacktrackingLinesearchState`.

    Raises:
      ValueError: for an argument outside its range.
      TypeError: for a schedule, a non-int `max_backtracking_steps` or a non-bool flag.
      MissingExtraArgError: (when traced) if `update` gets no `value_fn`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> f = lambda w: jnp.sum(w**2)
        >>> tx = gradtx.chain(gradtx.scale(-1.0), gradtx.scale_by_backtracking_linesearch(15))
        >>> w = jnp.array([1.0, 2.0])
        >>> u, state = tx.update(2 * w, tx.init(w), w, value_fn=f)
        >>> w + u, state[1].learning_rate  # 1.0 overshoots to -w; 0.8 does not
        (Array([-0.6, -1.2], dtype=float32), Array(0.8, dtype=float32))

    References:
      Nocedal & Wright, *Numerical Optimization*, 1999 (Algorithm 3.1); Vaswani et al.,
      *Painless stochastic gradient*, NeurIPS 2019.
    """
    fn = "scale_by_backtracking_linesearch"
    _checks.check_int(fn, "max_backtracking_steps", max_backtracking_steps, minimum=0)
    check_number(fn, "slope_rtol", slope_rtol)  # a decrease of the linear model's, as the zoom search's
    _checks.check_in_range(fn, "slope_rtol", slope_rtol, 0.0, 1.0, high_open=True)
    for name, value in (("atol", atol), ("rtol", rtol)):
        check_number(fn, name, value)
        _checks.check_nonnegative(fn, name, value)
    check_number(fn, "decrease_factor", decrease_factor)
    _checks.check_in_range(fn, "decrease_factor", decrease_factor, 0.0, 1.0, low_open=True, high_open=True)
    for name, value in (("increase_factor", increase_factor), ("max_learning_rate", max_learning_rate)):
        check_number(fn, name, value)
        _checks.check_positive(fn, name, value)
    _checks.check_bool(fn, "store_grad", store_grad)
    _checks.check_bool(fn, "verbose", verbose)
    fn = _checks.api_name(fn)

    def init_fn(params):
        dtype = value_dtype(params)
        return ScaleByBacktrackingLinesearchState(
            learning_rate=jnp.array(1.0, dtype),
            value=jnp.array(jnp.inf, dtype),
            grad=_placement.zeros_like(params) if store_grad else None,
            info=BacktrackingLinesearchInfo(strong(0), jnp.array(jnp.inf, dtype)),
        )

    def update_fn(updates, state, params=None, *, value=None, grad=None, value_fn=None, **extra_args):
        updates, value, grad, f = objective(fn, updates, state, params, value, grad, value_fn, extra_args)
        slope = tree.real(tree.vdot(updates, tree.conj(grad)))

        def decrease_error(stepsize, new_value):
            error = new_value - (1.0 + rtol) * value - stepsize * slope_rtol * slope
            return jnp.maximum(jnp.where(jnp.isnan(error), jnp.inf, error), 0.0)

        def cond(s):
            return (~(s.decrease_error <= atol)) & (s.iter_num <= max_backtracking_steps)

        def body(s):
            stepsize = jnp.where(s.iter_num > 0, decrease_factor * s.learning_rate, s.learning_rate)
            new_params = tree.add_scale(params, stepsize, updates)
            new_grad = s.new_grad
            if store_grad:  # the gradient by transposing the linearization, once the search ends
                new_value, jvp = jax.linearize(f, new_params)
                error = decrease_error(stepsize, new_value)
                new_grad = jax.lax.cond(
                    (error <= atol) | (s.iter_num == max_backtracking_steps),
                    lambda p: tree.cast_like(
                        jax.linear_transpose(jvp, p)(jnp.ones_like(new_value))[0], new_grad
                    ),
                    lambda p: new_grad,
                    new_params,
                )
            else:
                new_value = f(new_params)
                error = decrease_error(stepsize, new_value)
            return tree.cast_like(_Backtrack(stepsize, new_value, new_grad, error, s.iter_num + 1), s)

        start = jnp.minimum(increase_factor * state.learning_rate, max_learning_rate)
        # the gradient slot starts from the state's (always overwritten; a donated state's buffer is reused)
        first_grad = state.grad if store_grad else tree.zeros_like(params)
        s = jax.lax.while_loop(
            cond, body, _Backtrack(start, value, first_grad, jnp.array(jnp.inf), jnp.asarray(0))
        )
        learning_rate = jnp.where(jnp.isinf(s.decrease_error), 0.0, s.learning_rate)  # no step into inf/NaN
        if verbose:
            cond_print(
                s.decrease_error > atol,
                f"INFO: {fn}: no step size with sufficient decrease found (value {{value}}, slope {{slope}}, "
                "step size {stepsize}, decrease error {error}).",
                value=value,
                slope=slope,
                stepsize=s.learning_rate,
                error=s.decrease_error,
            )
        new_state = ScaleByBacktrackingLinesearchState(
            learning_rate,
            s.new_value,
            s.new_grad if store_grad else None,
            BacktrackingLinesearchInfo(s.iter_num, s.decrease_error),
        )
        new_updates = tree.cast_like(tree.scale(learning_rate, updates), updates)
        return new_updates, tree.cast_like(new_state, state)

    return _protocol.GradientTransformation(init_fn, update_fn)


def value_and_grad_from_state(value_fn: Callable[..., Any]) -> Callable[..., tuple[Any, Any]]:
    r"""`jax.value_and_grad(value_fn)` that reuses the value and gradient a line search kept in its state.

    The returned function is called as `value_and_grad(params, *args, state=opt_state,
    **kwargs)`. It finds the fields `value` and `grad` in `opt_state` (through chains and
    wrappers, `gradtx.tree.get`): where the value is finite they are the objective and its
    gradient at the params the line search accepted, so the step needs no new evaluation;
    at the first step (the value is inf) they are computed. For deterministic objectives
    only (a batch that changes between steps makes the kept values stale). The function of
    `optax.value_and_grad_from_state`.

    Args:
      value_fn: the objective, a scalar function of the params (and of `*args, **kwargs`).

    Returns:
      A function `(params, *args, state, **kwargs) -> (value, grad)`.

    Raises:
      TypeError: if `value_fn` is not callable.
      ValueError: (when called) if the state holds no `value` or no `grad` (e.g. a
        backtracking search without `store_grad`), or holds several.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> f = lambda w: jnp.sum(w**2)
        >>> tx = gradtx.lbfgs()
        >>> value_and_grad = gradtx.value_and_grad_from_state(f)
        >>> w = jnp.array([1.0, 2.0, 3.0])
        >>> state = tx.init(w)
        >>> for _ in range(2):
        ...     value, grad = value_and_grad(w, state=state)
        ...     u, state = tx.update(grad, state, w, value=value, grad=grad, value_fn=f)
        ...     w = gradtx.apply_updates(w, u)
        >>> float(f(w)) < 1e-10
        True
    """
    _checks.check_callable("value_and_grad_from_state", "value_fn", value_fn)

    def value_and_grad(params: Any, *fn_args: Any, state: Any, **fn_kwargs: Any) -> tuple[Any, Any]:
        value, grad = tree.get(state, "value"), tree.get(state, "grad")
        if value is None or grad is None:
            raise ValueError(
                "`value_and_grad_from_state`: the state holds no `value` or no `grad`; use a line search "
                "that keeps both (`scale_by_zoom_linesearch`, or `scale_by_backtracking_linesearch` with "
                "`store_grad=True`)."
            )
        return jax.lax.cond(
            jnp.isfinite(value),
            lambda *_: (value, grad),
            lambda p, a, kw: jax.value_and_grad(value_fn)(p, *a, **kw),
            params,
            fn_args,
            fn_kwargs,
        )

    return value_and_grad


__all__ = [
    "BacktrackingLinesearchInfo",
    "ScaleByBacktrackingLinesearchState",
    "scale_by_backtracking_linesearch",
    "value_and_grad_from_state",
]
