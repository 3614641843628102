"""Skip the steps whose updates (or the inner state) are not finite: `apply_if_finite`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import vma as _vma
from gradtx._core import walk as _walk
from gradtx.combinators import _carry, _conditional


def _zeros_like(u: Any) -> Any:
    """Zeros shaped like the update `u` (a row-sparse one keeps its rows)."""
    return u.with_values(jnp.zeros_like(u.values)) if _walk.is_row_sparse(u) else jnp.zeros_like(u)


class ApplyIfFiniteState(NamedTuple):
    """State of `apply_if_finite`."""

    notfinite_count: jax.Array  # int32: consecutive non-finite steps so far
    last_finite: jax.Array  # bool: whether the last step was finite
    total_notfinite: jax.Array  # int32: all non-finite steps so far
    inner_state: Any


def _typed_true(tree: Any) -> jax.Array:
    """`True`, typed (under `shard_map`) to vary as `_walk.all_finite(tree)` does (a type cast)."""
    true = jnp.asarray(True)
    for leaf in jax.tree.leaves(tree):
        true = _vma.typed_like(true, leaf)
    return true


def step_is_finite(updates: Any, out: Any, inner_state: Any) -> jax.Array:
    """Whether a step is finite, as `apply_if_finite` judges it (a bool scalar): the gradient `updates` is
    finite, and so is the inner transform's update `out` unless the inner state it was given is not.

    The second condition keeps replicas in step around a transform that averages over devices
    (`parallel.cross_shard`): a NaN on one replica reaches every replica's `out`, so every
    replica finds the step not finite, without a collective here. The inner state is read
    only when `out` is not finite (one `lax.cond`). Also `loss_scaled`'s test.
    """
    out_finite = _walk.all_finite(out)
    state_finite = _control.cond(out_finite, _typed_true, _walk.all_finite, inner_state)
    return _walk.all_finite(updates) & (out_finite | jnp.logical_not(state_finite))


@_registry.wrapper()
def apply_if_finite(
    tx: Any, max_consecutive_errors: int, *, check_updates: bool = True
) -> _protocol.GradientTransformation:
    """Skip steps with a non-finite gradient: zero updates and the inner state kept, with a count.

    A step is not finite when its gradient is not finite, as in `optax.apply_if_finite`, and
    then the inner transform does not run (one `lax.cond`). With `check_updates` (the
    default), a step is also not finite when the inner transform's update is not finite
    while the inner state it was given is finite. This is gradtx's addition: around a
    transform that averages over devices (`parallel.cross_shard`), a NaN on one replica
    reaches every replica's update but only one replica's gradient, so every replica must
    skip the same step to stay in sync; it costs a test of the update and a selection per
    leaf. After more than `max_consecutive_errors` non-finite steps in a row the update is
    applied anyway (so a run that keeps producing NaN fails visibly instead of stalling), as
    optax does; that step may leave the inner state non-finite (Adam's moments), and while
    it is, an update made non-finite by that state does not count as a new error: the
    counters then follow the gradients alone, so `notfinite_count`, `last_finite` and
    `total_notfinite` equal optax's at every step (the inner state is read for this only at
    steps whose update is not finite). The counters saturate at int32's maximum.

    It is the guard for every optimizer: without it, what one NaN or inf does depends on
    the rule (`registry.entry(name).nonfinite`): most make the params non-finite, but Lion's
    and Signum's momentum stays infinite for good behind finite params, and FTRL pins the
    param to 0. With it, params and state go on as if the step had not happened.

    Args:
      tx: the transform to protect.
      max_consecutive_errors: how many non-finite steps in a row to skip (an int >= 0).
      check_updates: also skip a step whose update is not finite (see above); False judges
        the gradients alone, as optax does, and compiles to optax's size.

    Returns:
      A `GradientTransformation` with state `ApplyIfFiniteState(notfinite_count, last_finite,
      total_notfinite, inner_state)`.

    Raises:
      TypeError / ValueError: for a bad `tx`, `max_consecutive_errors` or `check_updates`.

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
    _checks.check_bool(fn, "check_updates", check_updates)
    inner = _factory.member(tx)

    def init_fn(params):
        return ApplyIfFiniteState(
            _hyper.zero_count(), jnp.array(True), _hyper.zero_count(), inner.init(params)
        )

    def checked_update(updates, state, params=None, **extra_args):  # the inner transform runs every step
        out, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
        finite = step_is_finite(updates, out, state.inner_state)
        notfinite = jnp.where(finite, 0, _hyper.increment(state.notfinite_count)).astype(jnp.int32)
        take = finite | (notfinite > max_consecutive_errors)
        out = _walk.where(take, out, _walk.map_updates(fn, _zeros_like, out))
        kept = _carry.as_returned(fn, state.inner_state, inner_state)
        inner_state = _walk.where(take, inner_state, kept)
        total = jnp.where(finite, state.total_notfinite, _hyper.increment(state.total_notfinite))
        return out, ApplyIfFiniteState(notfinite, finite, total.astype(jnp.int32), inner_state)

    def update_fn(
        updates, state, params=None, **extra_args
    ):  # the inner transform runs if the gradients allow
        finite = _walk.all_finite(updates)
        errors = _hyper.increment(state.notfinite_count)  # the count if this step is not finite

        def inner_update(_):
            return inner.update(updates, state.inner_state, params, **extra_args)

        target, target_state = _placement.eval_shape(inner_update, None)

        def run(_):
            out, inner_state = inner_update(None)
            return _conditional.dense_unless_kept(updates, target, out), inner_state

        def skip(_):
            kept = _carry.as_returned(fn, state.inner_state, target_state)
            zeros = _walk.map_updates(fn, _zeros_like, updates)
            return _conditional.typed_like(zeros, target), _conditional.typed_like(kept, target_state)

        out, inner_state = _control.cond(finite | (errors > max_consecutive_errors), run, skip, None)
        notfinite = jnp.where(finite, 0, errors).astype(jnp.int32)
        total = jnp.where(finite, state.total_notfinite, _hyper.increment(state.total_notfinite))
        return out, ApplyIfFiniteState(notfinite, finite, total.astype(jnp.int32), inner_state)

    return _factory.composite(init_fn, checked_update if check_updates else update_fn, inner)
