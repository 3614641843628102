"""Steps that wait for several gradients, or skip bad ones: `accumulate_gradients`, `apply_if_finite`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gradtx import _base, _checks, _protocol, _tree, sparse


class AccumulateGradientsState(NamedTuple):
    """State of `accumulate_gradients`."""

    count: _protocol.Count  # int32: calls so far (micro-steps)
    accumulator: _protocol.Updates  # sum of the gradients since the last applied update (one tree)
    inner_state: Any  # the inner transform's state; it advances once per applied update


def _zeros_like_updates(tree: Any) -> Any:
    return jax.tree.map(lambda g: None if g is None else jnp.zeros_like(g), tree, is_leaf=lambda x: x is None)


@_base.api
def accumulate_gradients(tx: Any, every_k: int) -> _protocol.GradientTransformation:
    """Apply `tx` to the mean of every `every_k` gradients; zero updates in between.

    Gradient accumulation (a large batch from `every_k` small ones) with one accumulator
    tree of memory. The inner transform sees one update per `every_k` calls, so its own
    `count` (and its schedules) advance once per applied update. Row-sparse gradients are
    densified into the accumulator.

    Args:
      tx: the transform to apply to the mean gradient.
      every_k: how many gradients to average per update (an int >= 1).

    Returns:
      A `GradientTransformation` with state `AccumulateGradientsState(count, accumulator, inner_state)`.

    Raises:
      TypeError / ValueError: for a bad `tx` or `every_k`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=2)
        >>> s = tx.init(jnp.zeros(1))
        >>> u1, s = tx.update(jnp.array([1.0]), s)
        >>> u2, s = tx.update(jnp.array([3.0]), s)
        >>> u1, u2
        (Array([0.], dtype=float32), Array([-2.], dtype=float32))
    """
    fn = "accumulate_gradients"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_int(fn, "every_k", every_k, minimum=1)
    inner = _base.with_extra_args_support(tx)

    def init_fn(params):
        return AccumulateGradientsState(_tree.zero_count(), _tree.zeros_like(params), inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        dense = sparse.densify(updates)
        acc = _tree.map_updates(
            fn,
            lambda g, a: a + g.astype(a.dtype),
            dense,
            state.accumulator,
            names=("updates", "state.accumulator"),
        )
        apply = (state.count + 1) % every_k == 0

        def applied(acc, inner_state):
            mean = jax.tree.map(lambda a, g: (a / every_k).astype(g.dtype), acc, dense)
            out, inner_state = inner.update(mean, inner_state, params, **extra_args)
            return sparse.densify(out), _tree.zeros_like(acc), inner_state

        def waiting(acc, inner_state):
            return _zeros_like_updates(dense), acc, inner_state

        out, acc, inner_state = lax.cond(apply, applied, waiting, acc, state.inner_state)
        return out, AccumulateGradientsState(_tree.increment(state.count), acc, inner_state)

    return _base.composite(init_fn, update_fn, inner)


class ApplyIfFiniteState(NamedTuple):
    """State of `apply_if_finite`."""

    notfinite_count: jax.Array  # int32: consecutive non-finite steps so far
    last_finite: jax.Array  # bool: whether the last step was finite
    total_notfinite: jax.Array  # int32: all non-finite steps so far
    inner_state: Any


@_base.api
def apply_if_finite(tx: Any, max_consecutive_errors: int) -> _protocol.GradientTransformation:
    """Skip steps with a non-finite gradient: zero updates and the inner state kept, with a count.

    After more than `max_consecutive_errors` non-finite steps in a row the update is
    applied anyway (so a run that keeps producing NaN fails visibly instead of stalling),
    as `optax.apply_if_finite` does.

    Args:
      tx: the transform to protect.
      max_consecutive_errors: how many non-finite steps in a row to skip (an int >= 0).

    Returns:
      A `GradientTransformation` with state `ApplyIfFiniteState(notfinite_count, last_finite,
      total_notfinite, inner_state)`.

    Raises:
      TypeError / ValueError: for a bad `tx` or `max_consecutive_errors`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.apply_if_finite(gradtx.sgd(1.0), max_consecutive_errors=3)
        >>> u, s = tx.update(jnp.array([jnp.nan, 1.0]), tx.init(jnp.zeros(2)))
        >>> u, int(s.total_notfinite)
        (Array([0., 0.], dtype=float32), 1)
    """
    fn = "apply_if_finite"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_int(fn, "max_consecutive_errors", max_consecutive_errors, minimum=0)
    inner = _base.with_extra_args_support(tx)

    def init_fn(params):
        return ApplyIfFiniteState(_tree.zero_count(), jnp.array(True), _tree.zero_count(), inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        finite = _tree.all_finite(updates)
        out, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
        notfinite = jnp.where(finite, 0, state.notfinite_count + 1).astype(jnp.int32)
        take = finite | (notfinite > max_consecutive_errors)
        zeros = _tree.map_updates(
            fn,
            lambda u: (
                u.with_values(jnp.zeros_like(u.values)) if _tree.is_row_sparse(u) else jnp.zeros_like(u)
            ),
            out,
        )
        out = _tree.where(take, out, zeros)
        inner_state = _tree.where(take, inner_state, state.inner_state)
        total = (state.total_notfinite + jnp.logical_not(finite)).astype(jnp.int32)
        return out, ApplyIfFiniteState(notfinite, finite, total, inner_state)

    return _base.composite(init_fn, update_fn, inner)
