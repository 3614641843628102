"""Where `sharded_state` keeps its state: the two layouts, and moving a state between topologies.

- Inside `jax.shard_map` / `jax.pmap` each replica holds a flat slice of every leaf: the leaf
  flattened, zero-padded to N equal slices, one per replica (`padded`, `my_slice`); out of
  the mapped function with `P(axis_name)` a slot is a global `[N, ceil(size / N)]` array and
  a scalar (`count`) is `[N]` (N equal copies).
- Under `jax.jit` with a mesh every leaf keeps its shape and its parameter's sharding, and is
  split over the replica axes on its first dimension that divides evenly (`zero_spec`).

`unshard_state` turns either into the wrapped transform's own state -- exactly what the
unsharded transform holds -- and `shard_state` lays such a state out for any number of
replicas, so a run saved on N devices resumes on M.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from gradtx._core import factory as _factory
from gradtx._core import lowbit as _lowbit
from gradtx._core import protocol as _protocol
from gradtx._core import vma as _vma


class ShardedState(NamedTuple):
    """State of `sharded_state`: the wrapped transform's state, split over the replicas.

    Inside `shard_map` / `pmap`, `inner` is `tx`'s state for this replica's slice of every
    parameter (flattened and zero-padded to a multiple of N, then cut in N equal slices),
    and every array in it has a leading axis of length 1, so one spec places the whole
    state along the axis: `jax.shard_map(..., out_specs=P(axis_name))` gives global arrays
    with N rows (scalars such as `count` are repeated N times; the slots are 1/N of their
    full size each). Under `jax.jit` with a mesh, `inner` is `tx`'s state as it is, each
    slot split over the replica axes. `unshard_state` / `shard_state` move it between
    topologies.
    """

    inner: _protocol.OptState


# `inner` holds slices of the params (shard_map): not compared with the params' shapes
# (`_tree_checks.check_shapes`)
setattr(ShardedState, "inner_states_shaped_like_params", False)  # noqa: B010  (not a field)


# --------------------------------------------------------------------------- shard_map layout


def slice_len(size: int, n: int) -> int:
    return -(-size // n)


def padded(x: jax.Array, n: int) -> jax.Array:
    """`x` flattened and zero-padded to `n` equal rows: shape `[n, ceil(size / n)]`."""
    k = slice_len(x.size, n)
    flat = jnp.reshape(x, (-1,))
    return jnp.pad(flat, (0, n * k - x.size)).reshape(n, k)


def my_slice(x: jax.Array, n: int, axes: tuple) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(padded(x, n), jax.lax.axis_index(axes), axis=0, keepdims=False)


def row(x: Any, axes: tuple) -> jax.Array:
    """A state leaf as this replica's row of the global state; under `check_vma=True` typed as varying over
    `axes` (it is one replica's), whatever the rule computed it from, so `init` and `update` give one type."""
    return _vma.typed_like(jnp.asarray(x)[None], jax.lax.axis_index(axes))


class Slices:
    """What `gradtx._core.sliced` runs while a transform is given this replica's slices (`sharded_state`).

    `total` combines the replicas' partial reductions with one collective over `axes` (a
    pytree of partials is one all-reduce); `leaf_part` makes the whole leaf's array (its
    shape read from `shapes`, by key path) and keeps this replica's slice of it;
    `leaf_size` is the whole leaf's size, `leaf_shape` its shape; `in_leaf` puts this replica's slice
    where it is in the whole leaf (a replica's part of a reduction over some of its axes).
    """

    def __init__(self, n: int, axes: tuple, shapes: dict[str, tuple[int, ...]]) -> None:
        self.n, self.axes, self.shapes = n, axes, shapes

    def total(self, partial: Any, op: str) -> Any:
        if op == "sum":
            out = jax.lax.psum(partial, self.axes)
        elif op in ("max", "min"):
            out = (jax.lax.pmax if op == "max" else jax.lax.pmin)(partial, self.axes)
        else:  # all / any of bools: min / max of 0 and 1
            as_int = jax.tree.map(lambda x: jnp.asarray(x).astype(jnp.int32), partial)
            combined = (jax.lax.pmax if op == "any" else jax.lax.pmin)(as_int, self.axes)
            out = jax.tree.map(lambda x: x.astype(bool), combined)
        # typed (check_vma=True) as the partial was, so a rule's `cond` branches and state keep their types
        return jax.tree.map(_vma.typed_like, out, partial)

    def _shape(self, path: Any, x: jax.Array, what: str) -> tuple[int, ...]:
        key = jax.tree_util.keystr(tuple(path))
        shape = self.shapes.get(key)
        if shape is None or tuple(x.shape) != (slice_len(math.prod(shape), self.n),):
            raise ValueError(
                f"`sharded_state`: a rule {what} the whole parameter at {key or '<root>'}, but the tree it "
                f"was given does not match the parameters' (a combinator inside `sharded_state` changed its "
                f"structure); put that rule directly in `sharded_state`'s chain."
            )
        return shape

    def leaf_part(self, path: Any, x: jax.Array, make: Any) -> jax.Array:
        shape = self._shape(path, x, "makes an array shaped like (gradient noise)")
        return my_slice(make(shape), self.n, self.axes)

    def leaf_size(self, path: Any, x: jax.Array) -> int:
        return math.prod(self._shape(path, x, "divides by the size of (a root mean square)"))

    def leaf_shape(self, path: Any, x: Any) -> tuple[int, ...] | None:
        shape = self.shapes.get(jax.tree_util.keystr(tuple(path)))
        if shape is None or tuple(np.shape(x)) not in (shape, (slice_len(math.prod(shape), self.n),)):
            return None
        return shape

    def in_leaf(self, path: Any, x: jax.Array, fill: float) -> jax.Array:
        shape = self._shape(path, x, "reduces over axes of (a row or column statistic)")
        k = x.shape[0]
        leaf = _vma.typed_like(jnp.full((self.n * k,), fill, x.dtype), x)
        leaf = jax.lax.dynamic_update_slice_in_dim(leaf, x, jax.lax.axis_index(self.axes) * k, axis=0)
        return leaf[: math.prod(shape)].reshape(shape)


# --------------------------------------------------------------------------- jit layout


def _entry(e: Any) -> tuple:
    if e is None or e is P.UNCONSTRAINED:
        return ()
    return tuple(e) if isinstance(e, tuple) else (e,)


def zero_spec(shape: tuple[int, ...], spec: tuple, mesh: Any, axes: tuple[Hashable, ...]) -> tuple | None:
    """`spec` (one entry per dimension) with `axes` added to the first dimension that divides evenly.

    None when the leaf is already split over one of `axes`, or no dimension divides (it is
    then kept as its parameter is: a bias of odd length, a scalar).
    """
    if any(a in _entry(e) for e in spec for a in axes):
        return None
    n = math.prod(mesh.shape[a] for a in axes)
    for d, size in enumerate(shape):
        have = _entry(spec[d])
        k = n * math.prod(mesh.shape[a] for a in have)
        if size >= k and size % k == 0:
            new = (*have, *axes)
            out = list(spec)
            out[d] = new[0] if len(new) == 1 else new
            return tuple(out)
    return None


def _explicit(mesh: Any, axes: tuple) -> bool:
    types = dict(zip(mesh.axis_names, mesh.axis_types, strict=True))
    return all(types[a] == jax.sharding.AxisType.Explicit for a in axes)


def spec_of(x: Any, mesh: Any, axes: tuple) -> tuple:
    """The sharding of `x` as one spec entry per dimension (unconstrained where not known at trace time)."""
    if isinstance(x, jax.core.Tracer):
        if _explicit(mesh, axes):
            spec = tuple(jax.typeof(x).sharding.spec)
            return spec + (None,) * (x.ndim - len(spec))
        return (P.UNCONSTRAINED,) * x.ndim
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, NamedSharding) and sharding.mesh.shape == mesh.shape:
        spec = tuple(sharding.spec)
        return spec + (None,) * (x.ndim - len(spec))
    return (None,) * np.ndim(x)


def place(x: Any, spec: tuple, mesh: Any, axes: tuple) -> Any:
    """`x` with the sharding `spec`: a constraint (or `reshard` on explicit axes) inside `jit`, a
    `device_put` outside."""
    if not isinstance(x, jax.core.Tracer):
        entries = [None if e is P.UNCONSTRAINED else e for e in spec]
        while entries and entries[-1] is None and not _explicit(mesh, axes):  # as `jit` returns it
            entries.pop()
        return jax.device_put(x, NamedSharding(mesh, P(*entries)))
    if _explicit(mesh, axes):
        return jax.sharding.reshard(x, NamedSharding(mesh, P(*spec)))
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P(*spec)))


def split(x: Any, mesh: Any, axes: tuple) -> Any:
    """`x` split over `axes` on its first evenly dividing dimension (as it is, when none divides).

    Outside `jit` every leaf is placed on the mesh (a scalar replicated), so that the state
    `init` makes has the shardings `update` returns: the jitted step compiles once.
    """
    if x is None:
        return x
    spec = None if np.ndim(x) == 0 else zero_spec(tuple(np.shape(x)), spec_of(x, mesh, axes), mesh, axes)
    if spec is None:
        if isinstance(x, jax.core.Tracer):
            return x
        spec = spec_of(x, mesh, axes)
    return place(x, spec, mesh, axes)


def gathered(u: Any, like: Any, mesh: Any, axes: tuple) -> Any:
    """`u` (split like `split(like)`) put back to `like`'s own sharding: the all-gather of ZeRO-1."""
    if u is None or np.ndim(u) == 0:
        return u
    spec = spec_of(like, mesh, axes)
    if zero_spec(tuple(np.shape(u)), spec, mesh, axes) is None:
        return u
    if spec and all(e is P.UNCONSTRAINED for e in spec):  # auto axes: replicated over `axes`, free elsewhere
        d = next(d for d, s in enumerate(np.shape(u)) if s % math.prod(mesh.shape[a] for a in axes) == 0)
        spec = tuple(None if i == d else P.UNCONSTRAINED for i in range(len(spec)))
    return place(u, spec, mesh, axes)


# --------------------------------------------------------------------------- between topologies


def _on_host(x: Any) -> np.ndarray:
    """A leaf as one NumPy array in this process: an array spanning processes is gathered from every one
    (a collective: every process must ask for it)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def _leaf_from_rows(x: Any, like: Any) -> np.ndarray:
    x = _on_host(x)
    shape = tuple(np.shape(like))
    if x.shape == shape:  # the jit layout: every leaf keeps its shape
        return x
    if shape == () and x.ndim == 1:  # a scalar repeated once per replica
        return x[0]
    size = math.prod(shape)
    if x.ndim != 2 or x.size < size:
        raise ValueError(
            f"`unshard_state`: a leaf of shape {x.shape} cannot hold a state leaf of shape {shape}: "
            f"`like` is not the state of the wrapped transform for these parameters."
        )
    return x.reshape(-1)[:size].reshape(shape)


@_factory.api
def unshard_state(state: Any, like: _protocol.OptState) -> _protocol.OptState:
    """The wrapped transform's whole state, from a `sharded_state` state: what the unsharded transform holds.

    Works on either layout (the `[N, ceil(size / N)]` rows of `shard_map`, the sharded
    whole leaves of `jit`), on any number of replicas and of processes (arrays spanning
    processes are gathered: every process must call it). The result does not depend on
    the topology: save it (`gradtx.checkpoint.save_npz`, orbax) and restore it on another
    one with `shard_state`, or continue with the unsharded transform itself.

    Args:
      state: a `ShardedState` (global arrays, e.g. out of `shard_map` with `P(axis_name)`).
      like: the wrapped transform's state for the full parameters, or its shapes:
        `jax.eval_shape(tx.init, params)` of the transform given to `sharded_state`.

    Returns:
      A tree with the structure of `like`, holding NumPy arrays.

    Raises:
      ValueError: if a leaf of `state` cannot hold the matching leaf of `like`.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, gradtx
        >>> tx = gradtx.adam(0.1)
        >>> like = jax.eval_shape(tx.init, {"w": jnp.zeros(5)})
        >>> on_4 = gradtx.parallel.shard_state(tx.init({"w": jnp.arange(5.0)}), 4)  # as 4 replicas hold it
        >>> on_4.inner[0].m["w"].shape  # 5 elements: 4 rows of 2, zero-padded
        (4, 2)
        >>> gradtx.parallel.unshard_state(on_4, like)[0].m["w"].shape
        (5,)
    """
    inner = _lowbit.relabeled(getattr(state, "inner", state), like)  # a low-bit slot: the whole leaf's
    return jax.tree.map(_leaf_from_rows, inner, like)


@_factory.api
def shard_state(state: _protocol.OptState, num_replicas: int, like: Any = None) -> Any:
    """The wrapped transform's whole state laid out for `num_replicas` replicas of `sharded_state`.

    Every leaf is flattened and zero-padded to `num_replicas` rows (a scalar is repeated),
    exactly as `sharded_state`'s `init` would have laid it out on that many replicas. Place
    the result with `jax.device_put(s, NamedSharding(mesh, P(axis_name)))` (or pass it to the
    mapped step with `in_specs=P(axis_name)`). A scalar *parameter*'s slots are cut too (one
    element, on the first replica), which the state alone cannot tell from a scalar of the
    transform's own (a count, repeated): give `like` where the params have a scalar leaf.

    Args:
      state: the state of the wrapped transform for the full parameters (`unshard_state`'s
        result, or the unsharded transform's own state; arrays spanning processes are
        gathered: every process must call it).
      num_replicas: the number of replicas, an int >= 1.
      like: optional, the layout to fit: a `ShardedState` for `num_replicas` replicas, or its
        shapes (`jax.eval_shape` of the mapped `init` with `out_specs=P(axis_name)`); a
        scalar is then cut where `like`'s leaf has rows of one element.

    Returns:
      A `ShardedState` of NumPy arrays `[num_replicas, ...]`.

    Raises:
      ValueError: if `num_replicas` < 1, or `like` is not laid out for `num_replicas` replicas
        of this state.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> s = gradtx.parallel.shard_state({"w": jnp.arange(3.0)}, 2)
        >>> s.inner["w"].tolist()  # 3 elements on 2 replicas: rows of 2, the last element padding
        [[0.0, 1.0], [2.0, 0.0]]
    """
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ValueError(f"`shard_state`: `num_replicas` must be an int >= 1, got {num_replicas!r}.")

    def rows(x, cut=None):
        x = _on_host(x)
        if x.ndim == 0 and not cut:
            return np.repeat(x[None], num_replicas)
        k = slice_len(x.size, num_replicas)
        return np.pad(x.reshape(-1), (0, num_replicas * k - x.size)).reshape(num_replicas, k)

    if like is None:  # a low-bit slot: as a replica's slice of its leaf holds it
        return ShardedState(
            inner=_lowbit.as_slices(jax.tree.map(rows, state), lambda n: slice_len(n, num_replicas))
        )

    def fitted(x, target):
        shape = tuple(np.shape(target))
        if not shape or shape[0] != num_replicas or len(shape) > 2:
            raise ValueError(
                f"`shard_state`: `like` has a leaf of shape {shape}, not rows for {num_replicas} replicas: "
                f"give the layout of `sharded_state` on {num_replicas} replicas (`jax.eval_shape` of the "
                f"mapped `init`)."
            )
        return rows(x, cut=len(shape) == 2)

    target = getattr(like, "inner", like)
    return ShardedState(inner=jax.tree.map(fitted, _lowbit.relabeled(state, target), target))
