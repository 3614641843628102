"""Gradients that may be late, broken or stale: `sync_replicas` (SyncReplicasOptimizer) and
`drop_stale_gradients` (DropStaleGradientOptimizer)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx.parallel import _axes


class SyncReplicasState(NamedTuple):
    """State of `sync_replicas` (replicated: identical on every replica)."""

    count: _protocol.Count  # int32: applied updates (TF's global_step, advanced once per applied update)
    inner: _protocol.OptState  # the state of the wrapped transform (advances only when an update is applied)
    grad_accum: (
        _protocol.Updates
    )  # sum of g / R over the gradients taken since the last applied update (TF's accumulators)
    num_accumulated: jax.Array  # int32: how many replica gradients `grad_accum` holds (< R)
    dropped: jax.Array  # int32: replica gradients not used so far (not ok / non-finite, stale, surplus)
    stale: jax.Array  # int32: of `dropped`, those dropped as stale (`grad_step` < `count`)
    next_replica: jax.Array  # int32: where the next step starts looking: one past the last replica taken


@_registry.wrapper("SyncReplicasOptimizer", "SyncReplicas")
def sync_replicas(
    tx: Any,
    axis_name: _axes.AxisName,
    replicas_to_aggregate: int,
    total_num_replicas: int | None = None,
) -> _protocol.GradientTransformation:
    r"""Apply `tx` to the mean of R valid replica gradients, taken in turn (TF's SyncReplicasOptimizer).

    Each replica's gradient is *valid* when `replica_ok` is true for it and, when
    `grad_step` is passed, it is not stale (`grad_step >= count`, the global step; TF's
    accumulators drop gradients computed at an older step). By default `replica_ok` is
    "all its values are finite", so one replica producing NaN or inf does not poison the
    update; a `replica_ok` passed in replaces that test (combine it with
    `jnp.isfinite` yourself to have both). Valid gradients are taken until
    `replicas_to_aggregate` are collected, in replica order (the index along `axis_name`)
    starting one past the last replica taken on the previous step (`state.next_replica`,
    round robin); the others are dropped. TF takes the first R gradients to *arrive*, which
    is no fixed subset of the replicas; taking them in turn is the deterministic rule with
    the same property -- with backups (`total_num_replicas > replicas_to_aggregate`) no
    replica's data is always the one left out, and over N steps with every replica valid
    each replica's gradient counts R times (a fixed order would train on replicas 0..R-1
    only). When a step brings fewer than needed (failing replicas, or R larger than the
    number of replicas N: TF's case `total_num_replicas < replicas_to_aggregate`, which
    must be asked for by passing `total_num_replicas=N`), they are accumulated across steps
    until enough have arrived; then

    .. math::
        u = \mathrm{tx}\Big(\frac{1}{R} \sum_{\text{taken}} g_r\Big)

    is applied once, `count` (the global step) and `tx`'s state advance once, and the
    accumulator is emptied. On the other steps the update is zero and `tx`'s state is
    untouched. `state.dropped` counts every unused replica gradient, `state.stale` the
    stale ones among them.

    What backup replicas can do under SPMD: every replica runs every step, and every
    collective waits for every device, so a slow replica delays the step for all -- backups
    cannot hide stragglers as TF's asynchronous workers did (there, the R fastest gradients
    made the update and the slowest were dropped, so nobody waited for them). What remains
    is the choice of which gradients count: failed (non-finite, `replica_ok=False`) or stale
    ones are dropped without poisoning the update, and R < N subsamples the replicas'
    gradients fairly. To tolerate a dead or hanging device, restart on a smaller mesh
    (`sharded_state`'s `shard_state` moves a ZeRO state to it); `step_deadline` ends a
    process whose peer hangs instead of leaving it waiting.

    Row-sparse gradients are densified (the accumulator is dense). Under
    `jax.shard_map(..., check_vma=True)` each replica's own gradient is needed: a
    gradient already summed by autodiff (a replicated parameter's) raises `ValueError`.

    Args:
      tx: the transform applied to the aggregated gradient (gradtx or optax).
      axis_name: the mapped axis (or tuple of axes) of the replicas.
      replicas_to_aggregate: R, the number of replica gradients averaged per update. At
        most the number of replicas N unless `total_num_replicas` is passed: an R > N
        without it is refused at trace time (each update would silently take several steps).
      total_num_replicas: the number of replicas; optional, checked against the size of
        `axis_name` at trace time (in SPMD every replica runs every step). Passing it
        allows `replicas_to_aggregate` > N: gradients accumulate across steps, as in TF.

    Returns:
      A `GradientTransformation` with state `SyncReplicasState`. Its `update` takes the
      optional extra arguments `replica_ok` (a bool scalar per replica) and `grad_step`
      (the int global step at which this replica's gradient was computed).

    Raises:
      ValueError: for a count below 1; at trace time, when `axis_name` is not bound,
        `total_num_replicas` differs from the axis size, or `replicas_to_aggregate`
        exceeds the axis size and `total_num_replicas` is not given.
      TypeError: if `tx` is not a transform or a count is not an int.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> n = jax.device_count()
        >>> mesh = jax.make_mesh((n,), ("data",))
        >>> tx = gradtx.parallel.sync_replicas(gradtx.sgd(1.0), "data", replicas_to_aggregate=1)
        >>> def step(g):  # replica r's gradient is r + 1; a NaN one would count as not ok
        ...     u, state = tx.update(g, tx.init(jnp.zeros(g.shape)))  # replicated params, replicated state
        ...     return u, state.dropped
        >>> g = jax.device_put(jnp.arange(1.0, n + 1), jax.NamedSharding(mesh, P("data")))
        >>> u, dropped = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=P("data"), out_specs=P()))(g)
        >>> float(u[0]), int(dropped) == n - 1  # first step: replica 0's gradient; next step: replica 1's
        (-1.0, True)

    References:
      `tf.compat.v1.train.SyncReplicasOptimizer` (sync_replicas_optimizer.py).
    """
    fn = "sync_replicas"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_int(fn, "replicas_to_aggregate", replicas_to_aggregate, minimum=1)
    if total_num_replicas is not None:
        _checks.check_int(fn, "total_num_replicas", total_num_replicas, minimum=1)
    inner = _factory.member(tx)
    r = replicas_to_aggregate

    def init_fn(params):
        zero = _hyper.zero_count  # a buffer each: a donated state holds no buffer twice
        return SyncReplicasState(
            count=zero(),
            inner=inner.init(params),
            grad_accum=_placement.zeros_like(params),
            num_accumulated=zero(),
            dropped=zero(),
            stale=zero(),
            next_replica=zero(),
        )

    def update_fn(updates, state, params=None, *, replica_ok=None, grad_step=None, **extra_args):
        n = _axes.bound_size(fn, axes)
        if total_num_replicas is not None and total_num_replicas != n:
            raise ValueError(
                f"`{fn}`: `total_num_replicas`={total_num_replicas}, but the axis {axis_name!r} "
                f"has {n} replicas; every replica of the axis takes part (pass {n}, or leave it None "
                f"when `replicas_to_aggregate` <= {n})."
            )
        if total_num_replicas is None and r > n:
            raise ValueError(
                f"`{fn}`: `replicas_to_aggregate`={r}, but the axis {axis_name!r} has {n} replicas: no "
                f"step brings {r} gradients, so an update would be applied only every {-(-r // n)} steps "
                f"or less often. Pass `replicas_to_aggregate` <= {n}, or `total_num_replicas={n}` to "
                f"accumulate across steps as TF does (total_num_replicas < replicas_to_aggregate)."
            )
        checked = _axes.vma_checked(axes)
        grads = sparse.densify(updates)
        _axes.require_per_replica(fn, grads, axes, checked)
        ok = _walk.all_finite(grads) if replica_ok is None else jnp.asarray(replica_ok).astype(bool)
        if ok.shape != ():
            raise ValueError(f"`{fn}`: `replica_ok` must be a bool scalar per replica, got shape {ok.shape}.")
        num_stale = jnp.zeros([], jnp.int32)
        if grad_step is not None:
            stale = jnp.asarray(grad_step) < state.count
            ok = ok & ~stale
            num_stale = jax.lax.psum(stale.astype(jnp.int32), axes)
        # Take `need` valid gradients in replica order, starting at `next_replica` (round robin).
        need = r - state.num_accumulated
        flags = _axes.all_gather(ok.astype(jnp.int32)[None], axes, checked)  # [n], identical everywhere
        turn = (state.next_replica + jnp.arange(n, dtype=jnp.int32)) % n  # replicas in the order of this turn
        in_turn = flags[turn]
        taken_in_turn = (in_turn == 1) & (jnp.cumsum(in_turn) - in_turn < need)
        me = jax.lax.axis_index(axes)
        take = _axes.match_type(taken_in_turn[(me - state.next_replica) % n], ok)
        taken = jnp.sum(taken_in_turn, dtype=jnp.int32)
        last = jnp.max(jnp.where(taken_in_turn, jnp.arange(n, dtype=jnp.int32), -1))
        next_replica = jnp.where(taken > 0, (state.next_replica + last + 1) % n, state.next_replica)

        def accumulate(acc, g):  # g / R summed: R gradients near the float maximum do not overflow
            share = g / jnp.asarray(r, g.dtype)
            return acc + jax.lax.psum(jnp.where(take, share, jnp.zeros_like(share)), axes).astype(acc.dtype)

        # A None gradient (a variable without one) leaves its accumulator alone and reaches `tx` as None.
        accum = _walk.map_leaves(lambda a, g: a if g is None else accumulate(a, g), state.grad_accum, grads)
        num = state.num_accumulated + taken
        ready = num >= r
        mean = _walk.map_leaves(lambda g, a: None if g is None else a, grads, accum)
        new_updates, new_inner = inner.update(
            mean, state.inner, params, replica_ok=replica_ok, grad_step=grad_step, **extra_args
        )
        new_updates = _walk.map_updates(fn, lambda u: jnp.where(ready, u, jnp.zeros_like(u)), new_updates)
        return new_updates, SyncReplicasState(
            count=jnp.where(ready, _hyper.increment(state.count), state.count),
            inner=_walk.where(ready, new_inner, state.inner),
            grad_accum=_walk.map_leaves(
                lambda a: None if a is None else jnp.where(ready, 0, a).astype(a.dtype), accum
            ),
            num_accumulated=jnp.where(ready, 0, num).astype(jnp.int32),
            dropped=state.dropped + (n - taken),
            stale=state.stale + num_stale,
            next_replica=next_replica.astype(jnp.int32),
        )

    return _factory.composite(init_fn, update_fn, inner)


class DropStaleGradientsState(NamedTuple):
    """State of `drop_stale_gradients`."""

    count: _protocol.Count  # int32: applied updates (TF's global_step, advanced by accepted gradients only)
    inner: _protocol.OptState  # the state of the wrapped transform (untouched by a dropped gradient)
    stale_counter: jax.Array  # int32: dropped gradients so far (TF's "stale_counter")


@_registry.wrapper("DropStaleGradientOptimizer", "DropStaleGradient")
def drop_stale_gradients(tx: Any, staleness: int) -> _protocol.GradientTransformation:
    r"""Apply `tx` only to gradients at most `staleness` steps old (DropStaleGradientOptimizer).

    The extra argument `grad_step` is the global step at which the gradient was computed
    (read before the forward pass). With `count` the current global step (applied
    updates), the gradient is applied when `count - grad_step <= staleness`; otherwise
    the update is zero, `tx`'s state and `count` are untouched, and `stale_counter`
    grows by one. Uses no collectives: it works anywhere, mapped or not.

    Args:
      tx: the transform to protect (gradtx or optax).
      staleness: the largest accepted age, an int >= 0.

    Returns:
      A `GradientTransformation` with state `DropStaleGradientsState`; its `update` needs
      the extra argument `grad_step`.

    Raises:
      ValueError: if `staleness` is negative.
      TypeError: if `tx` is not a transform or `staleness` not an int; at call time
        (`MissingExtraArgError`) when `grad_step` is not passed.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.parallel.drop_stale_gradients(gradtx.sgd(1.0), staleness=0)
        >>> state = tx.init(jnp.zeros(1))
        >>> u, state = tx.update(jnp.ones(1), state, grad_step=0)   # fresh: applied
        >>> u, state = tx.update(jnp.ones(1), state, grad_step=0)   # computed before the last update: dropped
        >>> u, int(state.count), int(state.stale_counter)
        (Array([0.], dtype=float32), 1, 1)

    References:
      `tf.contrib.opt.DropStaleGradientOptimizer` (drop_stale_gradient_optimizer.py).
    """
    fn = "drop_stale_gradients"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_int(fn, "staleness", staleness, minimum=0)
    inner = _factory.member(tx)

    def init_fn(params):
        return DropStaleGradientsState(
            count=_hyper.zero_count(), inner=inner.init(params), stale_counter=_hyper.zero_count()
        )

    def zero_like(u):
        if _walk.is_row_sparse(u):
            return u.with_values(jnp.zeros_like(u.values))
        return jnp.zeros_like(u)

    def update_fn(updates, state, params=None, *, grad_step=None, **extra_args):
        if grad_step is None:
            raise _protocol.missing_extra_arg(fn, "grad_step", "step_when_the_gradient_was_computed")
        accept = (state.count - jnp.asarray(grad_step)) <= staleness
        new_updates, new_inner = inner.update(updates, state.inner, params, grad_step=grad_step, **extra_args)
        new_updates = _walk.map_updates(fn, lambda u: _walk.where(accept, u, zero_like(u)), new_updates)
        return new_updates, DropStaleGradientsState(
            count=jnp.where(accept, _hyper.increment(state.count), state.count),
            inner=_walk.where(accept, new_inner, state.inner),
            stale_counter=state.stale_counter + (~accept).astype(jnp.int32),
        )

    return _factory.composite(init_fn, update_fn, inner)
