"""ZeRO stage 1: `sharded_state` keeps 1/N of the optimizer state on each replica."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse
from gradtx.parallel import _axes
from gradtx.parallel._cross_shard import REDUCTIONS


class ShardedState(NamedTuple):
    """State of `sharded_state`: this replica's part of the wrapped transform's state.

    `inner` is `tx`'s state for the replica's slice of every parameter (flattened and
    zero-padded to a multiple of N, then cut in N equal slices). Every array in it has a
    leading axis of length 1, so one spec places the whole state along the axis:
    `jax.shard_map(..., out_specs=P(axis_name))` gives global arrays with N rows (scalars
    such as `count` are repeated N times; the slots are 1/N of their full size each).
    """

    inner: _protocol.OptState


def _slice_len(size: int, n: int) -> int:
    return -(-size // n)


def _padded(x: jax.Array, n: int) -> jax.Array:
    """`x` flattened and zero-padded to `n` equal rows: shape `[n, ceil(size / n)]`."""
    k = _slice_len(x.size, n)
    flat = jnp.reshape(x, (-1,))
    return jnp.pad(flat, (0, n * k - x.size)).reshape(n, k)


def _my_slice(x: jax.Array, n: int, axes: tuple) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(_padded(x, n), jax.lax.axis_index(axes), axis=0, keepdims=False)


@_base.api
def sharded_state(
    tx: Any, axis_name: _axes.AxisName, *, reduction: str = "mean"
) -> _protocol.GradientTransformation:
    r"""Data parallelism with the optimizer state split over the replicas (ZeRO stage 1).

    Each parameter and its gradient are flattened, zero-padded to a multiple of N and cut
    into N equal slices. The gradients are reduce-scattered (`psum_scatter`, "mean"
    divides by N): replica :math:`r` receives the reduced slice :math:`r`, applies `tx` to
    it with its own slice of the state (and of the parameters), and the updated slices are
    all-gathered into full updates. Every replica thus stores only 1/N of `tx`'s slots,
    and for element-wise transforms (all of TF's optimizers) the numbers equal
    `cross_shard(tx, axis_name, reduction)`. The padding never reaches the parameters.

    `tx` sees flat slices: transforms that look at whole tensors (norms, shapes,
    factored moments, global clipping) would see parts and are not equivalent. Row-sparse
    gradients are densified. `init` must run inside the mapped function too (it needs N
    and the replica's index). Under `check_vma=True`, a gradient already summed by
    autodiff is sliced instead of reduce-scattered; the returned updates are replicated
    (`all_gather(..., to="invarying")`), so the parameters keep `out_specs=P()`.

    Args:
      tx: the transform whose state is sharded (gradtx or optax), element-wise.
      axis_name: the mapped axis (or tuple of axes) of the replicas.
      reduction: "mean" or "sum" of the replicas' gradients.

    Returns:
      A `GradientTransformation` with state `ShardedState`.

    Raises:
      ValueError: for an unknown `reduction`; at trace time (`init` or `update`), when
        `axis_name` is not bound.
      TypeError: if `tx` is not a transform.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> n = jax.device_count()
        >>> mesh = jax.make_mesh((n,), ("data",))
        >>> tx = gradtx.parallel.sharded_state(gradtx.adam(0.1), "data")
        >>> def step(w, g):
        ...     state = tx.init(w)
        ...     updates, state = tx.update(g[0], state, w)  # g[0]: this replica's gradient
        ...     return gradtx.apply_updates(w, updates), state
        >>> g = jax.device_put(jnp.ones((n, 10)), jax.NamedSharding(mesh, P("data")))
        >>> specs = dict(in_specs=(P(), P("data")), out_specs=(P(), P("data")))  # state: split on "data"
        >>> step = jax.jit(jax.shard_map(step, mesh=mesh, **specs))
        >>> w, state = step(jnp.zeros(10), g)
        >>> [round(float(x), 4) for x in w[:3]], state.inner[0].m.shape == (n, -(-10 // n))
        ([-0.1, -0.1, -0.1], True)
    """
    fn = "sharded_state"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_one_of(fn, "reduction", reduction, REDUCTIONS)
    inner = _base.with_extra_args_support(tx)

    def init_fn(params):
        n = _axes.bound_size(fn, axes)
        slices = jax.tree.map(lambda p: _my_slice(jnp.asarray(p), n, axes), params)
        return ShardedState(inner=jax.tree.map(lambda x: jnp.asarray(x)[None], inner.init(slices)))

    def update_fn(updates, state, params=None, **extra_args):
        n = _axes.bound_size(fn, axes)
        checked = _axes.vma_checked(axes)
        grads = sparse.densify(updates)

        def reduce_slice(g):
            todo = _axes.varying_axes(g, axes, checked)
            if g.size and todo == axes:
                s = jax.lax.psum_scatter(_padded(g, n).reshape(-1), axes, scatter_dimension=0, tiled=True)
            else:  # already summed by autodiff over the other axes (check_vma=True): slice
                s = _my_slice(_axes.psum(g, todo) if g.size else g, n, axes)
            return s / jnp.asarray(n, s.dtype) if reduction == "mean" else s

        g_slices = _tree.map_updates(fn, reduce_slice, grads)
        p_slices = None if params is None else jax.tree.map(lambda p: _my_slice(p, n, axes), params)
        inner_state = jax.tree.map(lambda x: x[0], state.inner)
        u_slices, new_inner = inner.update(g_slices, inner_state, p_slices, **extra_args)

        def gather(u, g):
            full = _axes.all_gather(u, axes, checked) if u.size else jnp.zeros((0,), u.dtype)
            return full[: g.size].reshape(g.shape)

        out = _tree.map_updates(fn, gather, u_slices, grads, names=("updates", "gradients"))
        return out, ShardedState(inner=jax.tree.map(lambda x: jnp.asarray(x)[None], new_inner))

    if isinstance(inner, _protocol.ElementWise):  # on packed parameters: the buffers are sliced as they are
        return _protocol.ElementWise(init_fn, update_fn)
    return _protocol.GradientTransformation(init_fn, update_fn)  # made leaf-wise: slices of whole leaves
