"""The layout of packed parameters: which leaves go into which buffer, and a leaf's part of its buffer."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

MAX_LEAF_SIZE = 1 << 16
"""Leaves with more elements than this on a device (a sharded leaf counts its shard) are kept
as they are: their own kernels already run at memory bandwidth, and a view would be a copy."""


@dataclasses.dataclass(frozen=True)
class Group:
    """One buffer of packed leaves: its dtype, the mesh axes of its leading dims, its length.

    Attributes:
      dtype: the dtype name of the leaves.
      axes: the mesh axes the leading dims of the buffer run over (empty: a 1-D buffer).
      sizes: the sizes of those axes.
      length: elements per shard (the last dim).
      sharding: where the buffer is placed (None where the leaves' placement was not known,
        e.g. when packed under `jit`).
    """

    dtype: str
    axes: tuple
    sizes: tuple
    length: int
    sharding: Any

    @property
    def shape(self) -> tuple:
        """The buffer's shape: the sizes of its mesh axes, then its length."""
        return (*self.sizes, self.length)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each leaf of a tree lives in a `Packed` (static: hashable, compared by value).

    Attributes:
      treedef: the structure of the packed tree (`None` entries are leaves).
      entries: per leaf: `None` (a `None` leaf), `("loose", buffer)` (kept as it is), or
        `("packed", buffer, offset, shape, dims)`: its buffer, its offset along the last
        dim, its shape, and per dim of the leaf the leading dims of the buffer it is split over.
      groups: per packed buffer, a `Group`; the loose leaves' buffers come after them.
    """

    treedef: Any
    entries: tuple
    groups: tuple

    @property
    def num_buffers(self) -> int:
        """How many buffers a `Packed` with this layout holds (packed groups and loose leaves)."""
        return len(self.groups) + sum(1 for e in self.entries if e is not None and e[0] == "loose")


# --------------------------------------------------------------------------- placement


def _placement(leaf: Any, shape: tuple) -> tuple[Any, tuple, tuple, Any] | None:
    """`(key, axes, dims, buffer sharding)` of a leaf, or None when it cannot be packed where it lies.

    `dims[d]` are the positions in `axes` that dim `d` is split over.
    """
    if isinstance(leaf, jax.core.Tracer):
        if any(s is not None for s in getattr(jax.typeof(leaf).sharding, "spec", ())):
            return None  # sharded over explicit axes (in its type): kept as it is, as a placed leaf below
        return ("unplaced",), (), tuple(() for _ in shape), None
    sharding = getattr(leaf, "sharding", None)
    if sharding is None:
        return ("unplaced",), (), tuple(() for _ in shape), None
    if isinstance(sharding, NamedSharding) and not isinstance(sharding.mesh, jax.sharding.AbstractMesh):
        mesh, spec = sharding.mesh, tuple(sharding.spec)
        if len(spec) > len(shape):
            return None
        axes: list = []
        dims = []
        for d, n in enumerate(shape):
            entry = spec[d] if d < len(spec) else None
            names = () if entry is None else (entry if isinstance(entry, tuple) else (entry,))
            if not all(isinstance(a, str) for a in names):
                return None
            k = math.prod(mesh.shape[a] for a in names)
            if n % k:
                return None  # unevenly sharded: kept as it is
            dims.append(tuple(range(len(axes), len(axes) + len(names))))
            axes.extend(names)
        types = dict(zip(mesh.axis_names, mesh.axis_types, strict=True))
        if any(types[a] != jax.sharding.AxisType.Auto for a in axes):
            return None  # explicit axes type every reshape's sharding: such leaves are kept as they are
        placed = NamedSharding(mesh, PartitionSpec(*axes, None))
        return ("mesh", mesh, tuple(axes)), tuple(axes), tuple(dims), placed
    if sharding.is_fully_replicated:
        return ("replicated", sharding), (), tuple(() for _ in shape), sharding
    return None


def _is_leaf(x: Any) -> bool:
    return x is None


def layout_of(tree: Any, *, max_leaf_size: int = MAX_LEAF_SIZE) -> Layout:
    """The layout `pack` gives `tree`, without packing it.

    Args:
      tree: a pytree of arrays or `jax.ShapeDtypeStruct` objects (their shardings decide the groups).
      max_leaf_size: leaves with more elements than this on a device (a sharded leaf counts
        its shard) stay as they are.

    Returns:
      The `Layout`: one `Group` per buffer of packed leaves, and where each leaf lies.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tree = {"w": jax.ShapeDtypeStruct((4, 4), jnp.float32),
        ...         "b": jax.ShapeDtypeStruct((4,), jnp.bfloat16)}
        >>> [(g.dtype, g.length) for g in gradtx.packing.layout_of(tree).groups]
        [('bfloat16', 4), ('float32', 16)]
    """
    leaves, treedef = jax.tree.flatten(tree, is_leaf=_is_leaf)
    groups: dict[tuple, dict] = {}
    pending: list[tuple | None] = []
    for leaf in leaves:
        if leaf is None:
            pending.append(None)
            continue
        shape, dtype = tuple(np.shape(leaf)), jnp.dtype(leaf.dtype)
        size = math.prod(shape)
        placed = _placement(leaf, shape) if size and jnp.issubdtype(dtype, jnp.inexact) else None
        local = 0 if placed is None else size // math.prod(_sizes_of(placed[3], placed[1]))  # per device
        if placed is None or local > max_leaf_size:
            pending.append(("loose",))
            continue
        key, axes, dims, sharding = placed
        group = groups.setdefault(
            (dtype.name, key), {"axes": axes, "sharding": sharding, "length": 0, "index": len(groups)}
        )
        pending.append(("packed", group["index"], group["length"], shape, dims))
        group["length"] += local
    ordered = sorted(groups.items(), key=lambda kv: kv[1]["index"])
    group_specs = tuple(
        Group(dtype, g["axes"], _sizes_of(g["sharding"], g["axes"]), g["length"], g["sharding"])
        for (dtype, _), g in ordered
    )
    entries: list[tuple | None] = []
    loose = len(group_specs)
    for e in pending:
        if e is not None and e[0] == "loose":
            e, loose = ("loose", loose), loose + 1
        entries.append(e)
    return Layout(treedef, tuple(entries), group_specs)


def _sizes_of(sharding: Any, axes: tuple) -> tuple:
    return tuple(sharding.mesh.shape[a] for a in axes) if axes else ()


# --------------------------------------------------------------------------- a leaf <-> its part of a buffer


def _to_local(x: jax.Array, sizes: tuple, dims: tuple) -> jax.Array:
    """A leaf as `(k1, ..., km, local size)`: each shard's elements in its row of the leading dims."""
    if not sizes:
        return jnp.reshape(x, (-1,))
    split: list[int] = []
    lead_pos: list[int] = [0] * len(sizes)
    local_pos: list[int] = []
    for n, ds in zip(x.shape, dims, strict=True):
        k = math.prod(sizes[j] for j in ds)
        for j in ds:
            lead_pos[j] = len(split)
            split.append(sizes[j])
        local_pos.append(len(split))
        split.append(n // k)
    y = jnp.transpose(jnp.reshape(x, split), (*lead_pos, *local_pos))
    return jnp.reshape(y, (*sizes, -1))


def _from_local(y: jax.Array, sizes: tuple, dims: tuple, shape: tuple) -> jax.Array:
    """The inverse of `_to_local`: a leaf of `shape` from its `(k1, ..., km, local size)` part."""
    if not sizes:
        return jnp.reshape(y, shape)
    local = [n // math.prod(sizes[j] for j in ds) for n, ds in zip(shape, dims, strict=True)]
    y = jnp.reshape(y, (*sizes, *local))
    order = [p for d, ds in enumerate(dims) for p in (*ds, len(sizes) + d)]
    return jnp.reshape(jnp.transpose(y, order), shape)


def _paths(layout: Layout) -> list[str]:
    placeholder = layout.treedef.unflatten([0] * layout.treedef.num_leaves)
    paths = jax.tree_util.tree_flatten_with_path(placeholder, is_leaf=_is_leaf)[0]
    return [jax.tree_util.keystr(p) or "<root>" for p, _ in paths]


@functools.lru_cache(maxsize=256)
def _group_members(layout: Layout) -> tuple[tuple[int, ...], ...]:
    """Per group, the indices of its leaves, in the order of their offsets."""
    members: list[list[int]] = [[] for _ in layout.groups]
    for i, e in enumerate(layout.entries):
        if e is not None and e[0] == "packed":
            members[e[1]].append(i)
    return tuple(map(tuple, members))
