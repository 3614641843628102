"""Transforms applied at some steps only: `conditionally_transform`, `conditionally_mask` (as optax's)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx.combinators import _carry
from gradtx.combinators._zeroing import _zeros

ConditionFn = Callable[..., Any]
"""`should_transform_fn(count, **extra_args) -> bool scalar`: whether the inner transform runs now."""


class ConditionallyTransformState(NamedTuple):
    """State of `conditionally_transform`."""

    count: _protocol.Count  # int32: calls so far (the condition sees it before its increment)
    inner_state: Any  # the inner transform's state; it advances only at the steps it runs


class ConditionallyMaskState(NamedTuple):
    """State of `conditionally_mask`."""

    count: _protocol.Count  # int32: calls so far (the condition sees it before its increment)
    inner_state: Any  # the inner transform's state; it advances only at the steps it runs


def _keeps_rows(x: Any, t: Any) -> bool:
    """Whether a row-sparse update `x` can stay row-sparse beside `t`, the inner transform's abstract output
    for it: `t` is row-sparse with the same number of entries."""
    return _walk.is_row_sparse(x) and _walk.is_row_sparse(t) and x.values.shape == t.values.shape


def dense_unless_kept(updates: Any, target: Any, out: Any) -> Any:
    """The inner transform's output `out`, densified where a skipped step cannot keep its rows."""

    def leaf(x, t, y):
        return y.todense() if _walk.is_row_sparse(y) and not _keeps_rows(x, t) else y

    return _walk.map_leaves(leaf, updates, target, out)


def typed_like(tree: Any, target: Any) -> Any:
    """`tree` with the types of `target` (the abstract output of the inner transform): row-sparse leaves
    with its indices' flag (deduplicated if it is) or densified, every array cast to its dtype, so that
    both branches of `lax.cond` agree (e.g. bf16 params with f32 gradients)."""

    def leaf(x, t):
        if x is None or t is None:
            return x
        if _keeps_rows(x, t):
            x = x.deduplicated() if t.unique else x
            return sparse.RowSparse.tree_unflatten(
                (x.dense_shape, t.unique), (x.indices, x.values.astype(t.values.dtype))
            )
        x = x.todense() if _walk.is_row_sparse(x) else jnp.asarray(x)
        return x.astype(t.values.dtype if _walk.is_row_sparse(t) else t.dtype)

    return _walk.map_leaves(leaf, tree, target)


def _conditional(
    fn: str,
    inner: Any,
    should_transform_fn: Any,
    forward_extra_args: bool,
    skipped_updates,
    state_cls,
    count_field: str = "count",
):
    """The inner transform where `should_transform_fn(count)` holds; elsewhere `skipped_updates(updates)`
    and the inner state kept (one `lax.cond`: the inner work is skipped, not masked). The state is
    `state_cls(inner_state=..., <count_field>=...)` (optax's classes name the count `step`)."""
    _checks.check_transform(fn, "inner", inner)
    _checks.check_callable(fn, "should_transform_fn", should_transform_fn)
    _checks.check_bool(fn, "forward_extra_args", forward_extra_args)
    inner = _factory.member(inner)

    def init_fn(params):
        return state_cls(**{count_field: _hyper.zero_count(), "inner_state": inner.init(params)})

    def update_fn(updates, state, params=None, **extra_args):
        count = getattr(state, count_field)
        condition = jnp.asarray(should_transform_fn(count, **(extra_args if forward_extra_args else {})))
        if condition.shape != ():
            raise ValueError(
                f"`{fn}`: `should_transform_fn` must return a scalar bool, got an array of shape "
                f"{condition.shape}."
            )

        def inner_update(_):
            return inner.update(updates, state.inner_state, params, **extra_args)

        target, target_state = jax.eval_shape(inner_update, None)

        def run(_):
            out, inner_state = inner_update(None)
            return dense_unless_kept(updates, target, out), inner_state

        def skip(_):
            kept = _carry.as_returned(fn, state.inner_state, target_state)  # e.g. after `optax.tree.set`
            return typed_like(skipped_updates(updates), target), typed_like(kept, target_state)

        out, inner_state = _control.cond(condition.astype(bool), run, skip, None)
        return out, state_cls(**{count_field: _hyper.increment(count), "inner_state": inner_state})

    return _factory.composite(init_fn, update_fn, inner)


@_registry.wrapper()
def conditionally_transform(
    inner: Any, should_transform_fn: ConditionFn, *, forward_extra_args: bool = False
) -> _protocol.GradientTransformation:
    """Apply `inner` at the steps `should_transform_fn(count)` selects; pass the updates through elsewhere.

    `optax.conditionally_transform`: `count` is the number of earlier calls (0 at the first);
    where the condition is False the updates are returned unchanged and the inner state is
    kept as it is, so the inner transform's own `count` advances only at the steps it runs.
    The inner work is skipped (`lax.cond`), not computed and discarded, so an expensive
    inner rule (a preconditioner refresh, a periodic projection) costs only at its steps.
    To get zero updates at the other steps, use `conditionally_mask`.

    Args:
      inner: the transform to apply at the selected steps.
      should_transform_fn: `count -> bool scalar` (traced: use `jnp` comparisons, not `if`).
      forward_extra_args: pass `update`'s extra keyword arguments to `should_transform_fn`
        as well (`should_transform_fn(count, **extra_args)`).

    Returns:
      A `GradientTransformation` with state `ConditionallyTransformState(count, inner_state)`,
      `ElementWise` when `inner` is.

    Raises:
      TypeError: for a non-transform `inner`, a non-callable `should_transform_fn` or a
        non-bool `forward_extra_args`; at update time, `ValueError` if the condition is not a scalar.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.conditionally_transform(gradtx.scale(10.0), lambda count: count % 2 == 0)
        >>> state = tx.init(jnp.zeros(1))
        >>> u0, state = tx.update(jnp.ones(1), state)
        >>> u1, state = tx.update(jnp.ones(1), state)
        >>> u0, u1
        (Array([10.], dtype=float32), Array([1.], dtype=float32))
    """
    return _conditional(
        "conditionally_transform",
        inner,
        should_transform_fn,
        forward_extra_args,
        lambda updates: updates,
        ConditionallyTransformState,
    )


@_registry.wrapper()
def conditionally_mask(
    inner: Any, should_transform_fn: ConditionFn, *, forward_extra_args: bool = False
) -> _protocol.GradientTransformation:
    """Apply `inner` only at the steps `should_transform_fn(count)` selects; zero updates elsewhere.

    `optax.conditionally_mask`: as `conditionally_transform`, but where the condition is
    False the updates are zeros (the parameters do not move) and the inner state is kept.
    E.g. `conditionally_mask(adam, lambda count: count >= 1000)` holds the parameters still
    for the first 1,000 steps without advancing Adam's moments.

    Args:
      inner: the transform to apply at the selected steps.
      should_transform_fn: `count -> bool scalar` (traced: use `jnp` comparisons, not `if`).
      forward_extra_args: pass `update`'s extra keyword arguments to `should_transform_fn`
        as well (`should_transform_fn(count, **extra_args)`).

    Returns:
      A `GradientTransformation` with state `ConditionallyMaskState(count, inner_state)`,
      `ElementWise` when `inner` is.

    Raises:
      TypeError: for a non-transform `inner`, a non-callable `should_transform_fn` or a
        non-bool `forward_extra_args`; at update time, `ValueError` if the condition is not a scalar.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.conditionally_mask(gradtx.sgd(0.5), lambda count: count >= 1)
        >>> state = tx.init(jnp.zeros(1))
        >>> u0, state = tx.update(jnp.ones(1), state)
        >>> u1, state = tx.update(jnp.ones(1), state)
        >>> u0, u1
        (Array([0.], dtype=float32), Array([-0.5], dtype=float32))
    """
    return _conditional(
        "conditionally_mask",
        inner,
        should_transform_fn,
        forward_extra_args,
        lambda updates: _walk.map_updates("conditionally_mask", _zeros, updates),
        ConditionallyMaskState,
    )
