"""Synchronous data parallelism: `cross_shard` (CrossShardOptimizer), `tower_reduce` (TowerOptimizer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx.parallel import _axes

REDUCTIONS = ("mean", "sum")


def _reducing(
    fn: str, tx: Any, axes: tuple, reduction: str, groups: Any, hierarchical: bool, replicated_grads: Any
):
    inner = _factory.member(tx)

    def update_fn(updates, state, params=None, **extra_args):
        size = _axes.bound_size(fn, axes)
        _axes.check_groups_cover(fn, groups, size)
        checked = _axes.vma_checked(axes)
        if groups is None:
            _axes.check_replicated(fn, updates, axes, checked, replicated_grads)
        reduced = _walk.map_updates(
            fn,
            lambda g: _axes.reduce_leaf(
                fn,
                g,
                axes,
                reduction,
                size,
                checked,
                groups=groups,
                hierarchical=hierarchical,
                replicated_grads=replicated_grads,
            ),
            updates,
        )
        return inner.update(reduced, state, params, **extra_args)

    return _factory.composite(inner.init, update_fn, inner)


@_registry.wrapper("CrossShardOptimizer")
def cross_shard(
    tx: Any,
    axis_name: _axes.AxisName,
    reduction: str = "mean",
    *,
    axis_index_groups: Sequence[Sequence[int]] | None = None,
    replicated_grads: str | None = None,
) -> _protocol.GradientTransformation:
    r"""Reduce the gradients over the replicas of `axis_name`, then apply `tx` (TPU's CrossShardOptimizer).

    .. math::
        g = \frac{1}{N}\sum_{r=1}^{N} g_r \ (\text{"mean"}), \qquad
        g = \sum_{r=1}^{N} g_r \ (\text{"sum"})

    With "mean" and equal per-replica batches, one step equals the single-device step on
    the global batch. Call `update` inside `jax.shard_map` or `jax.pmap` over `axis_name`.
    `tx` sees the reduced gradient and keeps its own (replicated) state: this wrapper
    adds none, so its state is `tx`'s state.

    What the incoming gradients are is part of the contract. Each replica's own gradient
    (TF's per-shard loss) is reduced with `psum`: that is every gradient under
    `check_vma=False` and `pmap` (where a `pmean`-ed loss too differentiates to the
    replica's own gradient), and under `jax.shard_map(..., check_vma=True)` the gradient
    with respect to `gradtx.parallel.per_replica(params, axis_name)`. Under
    `check_vma=True` the gradient of a replicated parameter itself arrives already combined
    over the axis by autodiff (the transpose of the broadcast is a `psum`): the sum of the
    replicas' gradients for per-replica losses, their mean for a `pmean`-ed loss. Nothing
    in the array says which, so such a leaf needs `replicated_grads` ("sum": divided by N
    for "mean"; "mean": used as it is) and raises `ValueError` without it -- the same
    step code never gives a silently different update under the two `check_vma` settings.

    A `RowSparse` gradient stays row-sparse (with `axis_index_groups`: densified): the
    indices and values of all replicas are all-gathered (O(k N) memory, not O(table)),
    duplicates add up as in the dense sum, and `tx` applies its sparse rule to the union
    of the touched rows.

    Args:
      tx: the transform applied to the reduced gradient (gradtx or optax).
      axis_name: the mapped axis (or a tuple of axes) holding the replicas.
      reduction: "mean" (TF's `Reduction.MEAN`) or "sum".
      axis_index_groups: optional equal-sized groups of replica indices of a single axis;
        each group is reduced separately (TF's `group_assignment`). Under
        `check_vma=True` this gathers every replica's gradient (O(N) memory).
      replicated_grads: under `check_vma=True`, what a gradient that does not vary over
        `axis_name` holds: "sum" (each replica differentiated its own loss) or "mean" (the
        loss was `pmean`-ed over the replicas); None refuses such gradients.

    Returns:
      A `GradientTransformation` with the state of `tx`.

    Raises:
      ValueError: for an unknown `reduction` / `replicated_grads` or bad groups; at trace
        time, when `axis_name` is not bound (called outside `shard_map`/`pmap`), or for a
        gradient combined by autodiff without `replicated_grads`.
      TypeError: if `tx` is not a transform or `axis_name` is not a name.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
        >>> tx = gradtx.parallel.cross_shard(gradtx.sgd(0.1), "data")
        >>> def step(w, x):  # x: this replica's rows of the batch
        ...     w_own = gradtx.parallel.per_replica(w, "data")  # gradients: each replica's own
        ...     grads = jax.grad(lambda w: jnp.mean((x @ w - 1.0) ** 2))(w_own)
        ...     updates, _ = tx.update(grads, tx.init(w), w)
        ...     return gradtx.apply_updates(w, updates)
        >>> x = jax.device_put(jnp.ones((16, 2)), jax.NamedSharding(mesh, P("data")))
        >>> jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P("data")), out_specs=P()))(jnp.zeros(2), x)
        Array([0.2, 0.2], dtype=float32)

    References:
      `tf.contrib.tpu.CrossShardOptimizer` (tpu_optimizer.py).
    """
    fn = "cross_shard"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_one_of(fn, "reduction", reduction, REDUCTIONS)
    groups = _axes.check_groups(fn, axis_index_groups, axes)
    _axes.check_replicated_grads(fn, replicated_grads)
    return _reducing(fn, tx, axes, reduction, groups, False, replicated_grads)


@_registry.wrapper("TowerOptimizer")
def tower_reduce(
    tx: Any,
    axis_name: _axes.AxisName,
    *,
    loss_reduction: str = "mean",
    replicated_grads: str | None = None,
) -> _protocol.GradientTransformation:
    r"""Combine the gradients of all towers and apply `tx` once (TF's TowerOptimizer / replicate_model_fn).

    The same reduction as `cross_shard`; with a tuple `axis_name` it is hierarchical, one
    axis after the other in the order given -- e.g. `("local", "hosts")` sums the towers
    within a host first and then across hosts, as replicate_model_fn reduced on one
    device per host. "mean" (TF's loss scaled by 1/num_towers) divides by the product of
    the axis sizes.

    The incoming gradients follow `cross_shard`'s contract (`replicated_grads` for
    gradients autodiff combined under `check_vma=True`).

    Args:
      tx: the transform applied to the combined gradient (gradtx or optax).
      axis_name: the mapped axis of the towers, or a tuple of axes, innermost first.
      loss_reduction: "mean" or "sum" (how the towers' losses combine).
      replicated_grads: "sum", "mean" or None, as for `cross_shard`.

    Returns:
      A `GradientTransformation` with the state of `tx`.

    Raises:
      ValueError: for an unknown `loss_reduction` / `replicated_grads`; at trace time, when
        an axis is not bound or for a gradient combined by autodiff without `replicated_grads`.
      TypeError: if `tx` is not a transform or `axis_name` is not a name.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> n = jax.device_count()
        >>> mesh = jax.make_mesh((1, n), ("hosts", "local"))
        >>> tx = gradtx.parallel.tower_reduce(gradtx.sgd(1.0), ("local", "hosts"), loss_reduction="sum")
        >>> def step(g):  # g: this tower's gradient, 1.0
        ...     return tx.update(g[0], tx.init(g[0]))[0]
        >>> g = jax.device_put(jnp.ones((n, 1)), jax.NamedSharding(mesh, P(("hosts", "local"))))
        >>> u = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=P(("hosts", "local")), out_specs=P()))(g)
        >>> bool(u[0] == -n)  # the towers' gradients summed, then the SGD step
        True

    References:
      `tf.contrib.estimator.TowerOptimizer` and `replicate_model_fn` (replicate_model_fn.py).
    """
    fn = "tower_reduce"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_one_of(fn, "loss_reduction", loss_reduction, REDUCTIONS)
    _axes.check_replicated_grads(fn, replicated_grads)
    return _reducing(fn, tx, axes, loss_reduction, None, True, replicated_grads)


@_factory.api
def axis_size(axis_name: _axes.AxisName) -> int:
    """The number of replicas over `axis_name` (the product of the sizes, for a tuple of axes).

    Args:
      axis_name: the mapped axis (or a tuple of axes) holding the replicas.

    Returns:
      The number of replicas, a Python int.

    Raises:
      ValueError: when `axis_name` is not bound (called outside `shard_map`/`pmap`).

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> f = jax.pmap(lambda x: x * gradtx.parallel.axis_size("i"), axis_name="i")
        >>> int(f(jnp.ones(jax.device_count()))[0]) == jax.device_count()
        True
    """
    fn = "axis_size"
    return _axes.bound_size(fn, _axes.check_axis_name(fn, axis_name))


@_factory.api
def mean_over(value: Any, axis_name: _axes.AxisName) -> Any:
    """The mean of a per-replica value (a loss, a metric) over the replicas of `axis_name`.

    Leaves that do not vary over the axis (under `check_vma=True`: already equal on all
    replicas) are returned as they are; the others are averaged with `pmean`.

    Args:
      value: a pytree of arrays computed on each replica.
      axis_name: the mapped axis (or a tuple of axes) holding the replicas.

    Returns:
      The averaged tree, the same on every replica.

    Raises:
      ValueError: at trace time, when `axis_name` is not bound.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
        >>> x = jax.device_put(jnp.arange(float(jax.device_count())), jax.NamedSharding(mesh, P("data")))
        >>> def mean(x):
        ...     return gradtx.parallel.mean_over(x[0], "data")
        >>> f = jax.shard_map(mean, mesh=mesh, in_specs=P("data"), out_specs=P())
        >>> float(jax.jit(f)(x)) == (jax.device_count() - 1) / 2
        True
    """
    fn = "mean_over"
    axes = _axes.check_axis_name(fn, axis_name)
    _axes.bound_size(fn, axes)
    checked = _axes.vma_checked(axes)

    def mean(x):
        over = _axes.varying_axes(x, axes, checked)
        return jax.lax.pmean(x, over) if over else x

    return jax.tree.map(mean, value)


@_factory.api
def per_replica(tree: Any, axis_name: _axes.AxisName) -> Any:
    """`tree` as per-replica values, so that gradients with respect to it are each replica's own.

    Under `jax.shard_map(..., check_vma=True)` a replicated parameter is typed as equal on
    all replicas, and autodiff returns its gradient already summed over the axis. Taking
    the gradient with respect to `per_replica(params, axis)` instead gives every replica
    its own gradient, which TF's per-replica processing (clipping before
    `CrossShardOptimizer`'s reduction, `sync_replicas`, the averaging wrappers) needs.
    Under `check_vma=False` and `pmap` values are already per replica: `tree` is returned.

    Args:
      tree: a pytree of arrays (usually the params).
      axis_name: the mapped axis (or a tuple of axes) holding the replicas.

    Returns:
      The same values, typed as varying over `axis_name`.

    Raises:
      ValueError: at trace time, when `axis_name` is not bound.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
        >>> def grads(w, x):  # each replica's own gradient, not their sum
        ...     w = gradtx.parallel.per_replica(w, "data")
        ...     return jax.grad(lambda w: jnp.sum(x * w))(w)[None]
        >>> x = jax.device_put(jnp.arange(float(jax.device_count())), jax.NamedSharding(mesh, P("data")))
        >>> grads = jax.shard_map(grads, mesh=mesh, in_specs=(P(), P("data")), out_specs=P("data"))
        >>> g = jax.jit(grads)(1.0, x)
        >>> bool((g == x).all())
        True
    """
    fn = "per_replica"
    axes = _axes.check_axis_name(fn, axis_name)
    _axes.bound_size(fn, axes)
    if not _axes.vma_checked(axes):
        return tree

    def cast(x):
        missing = tuple(a for a in axes if a not in _axes.varying(x))
        return jax.lax.pcast(x, missing, to="varying") if missing else x

    return jax.tree.map(cast, tree)


@_factory.api
def replica_key(key: jax.Array, axis_name: _axes.AxisName) -> jax.Array:
    """A PRNG key of each replica's own: `key` folded with the replica's index along `axis_name`.

    Replicas that draw from one replicated key draw the same numbers; with this key each
    draws its own (gradient noise, dropout), reproducibly.

    Args:
      key: a typed PRNG key (`jax.random.key`), the same on every replica.
      axis_name: the mapped axis (or a tuple of axes) holding the replicas.

    Returns:
      The replica's key.

    Raises:
      ValueError: when `axis_name` is not bound.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> def draw(_):
        ...     return jax.random.uniform(gradtx.parallel.replica_key(jax.random.key(0), "i"))
        >>> u = jax.pmap(draw, axis_name="i")(jnp.zeros(jax.device_count()))
        >>> len(set(u.tolist())) == jax.device_count()
        True
    """
    fn = "replica_key"
    axes = _axes.check_axis_name(fn, axis_name)
    _axes.bound_size(fn, axes)
    return jax.random.fold_in(key, jax.lax.axis_index(axes))
