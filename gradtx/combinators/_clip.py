"""Gradient clipping as TF computes it: `clip` (value), `clip_by_norm` (per tensor), `clip_by_global_norm`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import packing
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import rule_parts as _rule_parts
from gradtx._core import walk as _walk


class ClipState(NamedTuple):
    """State of a clipping transform whose bound is a schedule."""

    count: _protocol.Count  # int32: completed updates


def _stateless(fn: str, bound: Any, apply) -> _protocol.GradientTransformation:
    """A transform `apply(updates, bound_value)`; `count` is in its state only when `bound` is a schedule."""
    scheduled = _hyper.any_schedule(bound)

    def init_fn(params):
        del params
        return ClipState(_hyper.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        if scheduled:
            return apply(updates, _hyper.resolve(bound, state.count)), ClipState(
                _hyper.increment(state.count)
            )
        return apply(updates, bound), state

    return _protocol.GradientTransformation(init_fn, update_fn)


@_registry.transform()
@_factory.real_only("complex numbers are not ordered (clip |u| with clip_by_norm)")
def clip(max_delta: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""Clip every element of the updates to `[-max_delta, max_delta]` (`tf.clip_by_value`).

    .. math:: u \leftarrow \min(\max(u, -\delta), \delta)

    Row-sparse updates are clipped in their values. An update of +-inf becomes
    +-`max_delta`, NaN stays NaN; wrap in `apply_if_finite` to skip such steps.

    Args:
      max_delta: the bound, >= 0 (number, scalar array or schedule).

    Returns:
      A `GradientTransformation` (state `EmptyState()`, or `ClipState(count)` for a schedule).

    Raises:
      ValueError: if `max_delta` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.clip(1.0)
        >>> tx.update(jnp.array([-3.0, 0.5, 2.0]), tx.init(None))[0]
        Array([-1. ,  0.5,  1. ], dtype=float32)
    """
    _checks.check_nonnegative("clip", "max_delta", max_delta)

    def apply(updates, bound):
        def leaf(g):
            v = _walk.values_of(g)
            b = _hyper.like(bound, v)
            return _walk.with_values(g, jnp.clip(v, -b, b))

        return _walk.map_updates("clip", leaf, updates)

    return _protocol.ElementWise(*_stateless("clip", max_delta, apply))


@_registry.transform()
def clip_by_norm(max_norm: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""Rescale each tensor whose L2 norm exceeds `max_norm` to norm `max_norm` (`tf.clip_by_norm`).

    .. math:: u \leftarrow \frac{u\, c}{\max(\lVert u \rVert_2, c)}

    Per tensor, with TF's arithmetic (`u * c` first, then the division; a zero tensor stays
    zero). A row-sparse update is measured and scaled by its values, as TF does with
    `IndexedSlices`.

    Args:
      max_norm: the largest allowed norm per tensor, >= 0 (number, scalar array or schedule).

    Returns:
      A `GradientTransformation` (state `EmptyState()`, or `ClipState(count)` for a schedule).

    Raises:
      ValueError: if `max_norm` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.clip_by_norm(1.0)
        >>> out, _ = tx.update({"a": jnp.array([3.0, 4.0]), "b": jnp.array([0.3, 0.4])}, tx.init(None))
        >>> out["a"], out["b"]
        (Array([0.6, 0.8], dtype=float32), Array([0.3, 0.4], dtype=float32))
    """
    _checks.check_nonnegative("clip_by_norm", "max_norm", max_norm)

    def apply(updates, bound):
        leaves, treedef = jax.tree.flatten(updates, is_leaf=_walk.is_update_leaf)
        _rule_parts.refuse_integers("clip_by_norm", updates, leaves, treedef, None, None)  # a norm's scale

        def leaf(g):
            v = _walk.values_of(g)
            return _walk.with_values(g, _formulas.clip_to_norm(v, _hyper.like(bound, v)))

        return _walk.map_updates("clip_by_norm", leaf, updates)

    # per tensor, its norm through `_sliced`: exact on ZeRO's slices (`sharded_state` takes it in `shard_map`)
    return _protocol.SliceWise(*packing.leaf_wise(_stateless("clip_by_norm", max_norm, apply)))


class ClipByGlobalNormState(NamedTuple):
    """State of `clip_by_global_norm`."""

    count: _protocol.Count  # int32: completed updates
    global_norm: jax.Array  # the norm of the last updates before clipping (for logging; read, never fed back)


@_registry.transform()
def clip_by_global_norm(max_norm: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""Scale all updates together so their global L2 norm is at most `max_norm`: `tf.clip_by_global_norm`.

    .. math::
        n = \sqrt{\textstyle\sum_i \lVert u_i \rVert_2^2}, \qquad
        u_i \leftarrow u_i \cdot c \min(1/n, 1/c)

    TF's arithmetic: `n` from `tf.linalg.global_norm` (sum of `l2_loss`), the scale
    `c * min(1/n, 1/c)`, and a non-finite `n` makes every update NaN (as TF). The norm is
    computed once per step, in one read of the updates, and kept in the state
    (`state.global_norm`) so that logging (e.g. `optimize_loss`'s `global_gradient_norm`)
    does not compute it again. Row-sparse updates count by their values, as TF counts
    `IndexedSlices`.

    Args:
      max_norm: the largest allowed global norm, > 0 (number, scalar array or schedule).

    Returns:
      A `GradientTransformation` with state `ClipByGlobalNormState(count, global_norm)`.

    Raises:
      ValueError: if `max_norm` is not positive.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.clip_by_global_norm(1.0)
        >>> out, state = tx.update({"a": jnp.array([3.0]), "b": jnp.array([4.0])}, tx.init(None))
        >>> out["a"], out["b"], state.global_norm
        (Array([0.6], dtype=float32), Array([0.8], dtype=float32), Array(5., dtype=float32))
    """
    _checks.check_positive("clip_by_global_norm", "max_norm", max_norm)

    def init_fn(params):
        del params
        return ClipByGlobalNormState(_hyper.zero_count(), jnp.zeros([], jnp.float32))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        out, norm = clip_to_global_norm(updates, _hyper.resolve(max_norm, state.count))
        return out, ClipByGlobalNormState(_hyper.increment(state.count), norm.astype(jnp.float32))

    return _protocol.ElementWise(init_fn, update_fn)


def global_norm_scale(norm: jax.Array, max_norm: Any) -> jax.Array:
    """TF's `clip_by_global_norm` factor for a global norm: `c * min(1 / norm, 1 / c)`, NaN for NaN."""
    c = jnp.asarray(max_norm, norm.dtype)
    return c * jnp.minimum(1.0 / norm, 1.0 / c) + (norm - norm)


def clip_to_global_norm(updates: Any, max_norm: Any) -> tuple[Any, jax.Array]:
    """`clip_by_global_norm`'s step for a resolved `max_norm`: (the clipped updates, their norm before)."""
    norm = _formulas.global_norm(updates)
    scale = global_norm_scale(norm, max_norm)

    def leaf(g):
        v = _walk.values_of(g)
        return _walk.with_values(g, v * scale.astype(v.dtype))

    return _walk.map_updates("clip_by_global_norm", leaf, updates), norm
