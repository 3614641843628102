"""How a group of stacked matrix work travels between the devices for `split_matrix_work`: its parts
joined into one buffer per dtype for a collective (`Buffers`), and each part held split along its
matrices' rows and moved to and from the per-device program by all-to-alls (`Blocks`)."""

from __future__ import annotations

import math
from typing import Any, Hashable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from gradtx.parallel import _axes


class Buffers(NamedTuple):
    """How a group's stacked arrays (a tree, each `(n, ...)`; or `sharded_state`'s rows of the state, each
    `(1, ...)`) travel to the other devices: one buffer `(n, size)` per dtype (`joined`), or each array as
    it is. A buffer lives only for its collective, inside the step: the user's leaves and the state keep
    their own arrays."""

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]  # each array's shape after its stack axis
    buffers: tuple[tuple[int, ...], ...]  # each buffer's arrays (their indices)
    joined: bool

    @classmethod
    def of(cls, tree: Any, joined: bool) -> Buffers:
        leaves, treedef = jax.tree.flatten(tree)
        by_dtype: dict[Any, list[int]] = {}
        for j, x in enumerate(leaves):
            by_dtype.setdefault(jnp.dtype(x.dtype) if joined else j, []).append(j)
        return cls(treedef, tuple(x.shape[1:] for x in leaves), tuple(map(tuple, by_dtype.values())), joined)

    def join(self, tree: Any) -> tuple[jax.Array, ...]:
        leaves = jax.tree.leaves(tree)
        if not self.joined:
            return tuple(leaves)
        flat = [x.reshape(x.shape[0], -1) for x in leaves]
        return tuple(jnp.concatenate([flat[i] for i in j], axis=1) for j in self.buffers)

    def parts(self, buffers: Sequence[jax.Array]) -> Any:
        if not self.joined:
            return self.treedef.unflatten(buffers)
        leaves: list[Any] = [None] * len(self.shapes)
        for buffer, members in zip(buffers, self.buffers, strict=True):
            start = 0
            for j in members:
                size = math.prod(self.shapes[j])
                leaves[j] = buffer[:, start : start + size].reshape(buffer.shape[0], *self.shapes[j])
                start += size
        return self.treedef.unflatten(leaves)


def split_along(axis: int | None, mesh_axes: tuple[Hashable, ...]) -> P:
    return P() if axis is None else P(*(None,) * axis, mesh_axes)


class Blocks(NamedTuple):
    """How a group's stacked parts (a tree of `(n, ...)` arrays, `n` a multiple of the device count `size`)
    travel between their layout and the per-device program: each part split along the first axis of its
    matrices that `size` divides (`axis`: a leaf's rows, or for a part that stacks a leaf with others of its
    shape, as SOAP's does, the leaf's rows), all such parts of one dtype moved by one all-to-all; a part
    none of whose axes `size` divides travels whole (a random key, a leaf of an odd shape: all-gathered)."""

    treedef: Any
    axes: tuple[int | None, ...]  # each part: the axis it is split along (None: whole)
    split_shapes: tuple[tuple[int, ...], ...]  # each split part's shape after its stack axis
    blocks: Buffers  # the split parts' blocks of one matrix on one device, joined per dtype
    wholes: Buffers  # the whole parts, joined per dtype

    @staticmethod
    def axis(shape: tuple[int, ...], size: int) -> int | None:
        return next((a for a in range(1, len(shape)) if shape[a] % size == 0), None)

    @classmethod
    def spec(cls, x: Any, mesh_axes: tuple[Hashable, ...], size: int) -> P:
        """Where a stacked part lies, outside the per-device program."""
        return split_along(cls.axis(tuple(x.shape), size), mesh_axes)

    @classmethod
    def of(cls, tree: Any, size: int, whole: bool = False) -> Blocks:
        """`whole`: every part travels whole."""
        leaves, treedef = jax.tree.flatten(tree)
        axes = tuple(None if whole else cls.axis(tuple(x.shape), size) for x in leaves)
        split = [(x, a) for x, a in zip(leaves, axes, strict=True) if a is not None]
        block = [  # one matrix's block of a split part, on one device
            jax.ShapeDtypeStruct((1, *x.shape[1:a], x.shape[a] // size, *x.shape[a + 1 :]), x.dtype)
            for x, a in split
        ]
        whole_parts = [x for x, a in zip(leaves, axes, strict=True) if a is None]
        return cls(
            treedef,
            axes,
            tuple(tuple(x.shape[1:]) for x, _ in split),
            Buffers.of(block, joined=True),
            Buffers.of(whole_parts, joined=True),
        )

    def specs(self, mesh_axes: tuple[Hashable, ...]) -> Any:
        return self.treedef.unflatten([split_along(a, mesh_axes) for a in self.axes])

    def _apart(self, tree: Any) -> tuple[list[Any], list[Any]]:
        """`tree`'s parts: the split ones, the whole ones."""
        leaves = jax.tree.leaves(tree)
        return [x for x, a in zip(leaves, self.axes, strict=True) if a is not None], [
            x for x, a in zip(leaves, self.axes, strict=True) if a is None
        ]

    def _together(self, split: list[Any], whole: list[Any]) -> Any:
        split_it, whole_it = iter(split), iter(whole)
        return self.treedef.unflatten([next(whole_it if a is None else split_it) for a in self.axes])

    def mine(self, stack: Any, mesh_axes: tuple[Hashable, ...], size: int) -> Any:
        """Inside the per-device program: this device's `n / size` matrices of each part, whole."""
        split, whole = self._apart(stack)
        k = (split or whole)[0].shape[0] // size
        moved = []
        for buffer in self.blocks.join(split):
            # [n, cols] -> [k, size * cols]: this device's k matrices, each device's blocks of them in turn
            y = jax.lax.all_to_all(buffer, mesh_axes, 0, 1, tiled=True)
            moved.append(y.reshape(k, size, -1).swapaxes(0, 1).reshape(size * k, -1))
        axes = [a for a in self.axes if a is not None]
        matrices = []
        for y, a, shape in zip(self.blocks.parts(moved), axes, self.split_shapes, strict=True):
            # [size * k, block] -> the devices' blocks side by side along axis a: whole matrices
            y = jnp.moveaxis(y.reshape(size, k, *y.shape[1:]), 0, a)
            matrices.append(y.reshape(k, *shape))
        index = jax.lax.axis_index(mesh_axes)
        return self._together(matrices, [jax.lax.dynamic_slice_in_dim(x, index * k, k) for x in whole])

    def back(self, results: Any, mesh_axes: tuple[Hashable, ...], size: int) -> Any:
        """Inside the per-device program: this device's results (of its `k` matrices) -> each split part's
        blocks of all `n` matrices (by one all-to-all per dtype), each whole part gathered."""
        split, whole = self._apart(results)
        axes = [a for a in self.axes if a is not None]
        out = []
        for y, a in zip(split, axes, strict=True):
            # [k, ..., d, ...] -> [size * k, block]: the block of each of its matrices for each device
            y = y.reshape(*y.shape[:a], size, y.shape[a] // size, *y.shape[a + 1 :])
            y = jnp.moveaxis(y, a, 0)
            out.append(y.reshape(size * y.shape[1], *y.shape[2:]))
        # each device sends its matrices' blocks to their devices: [n, block], in the matrices' order
        moved = [jax.lax.all_to_all(t, mesh_axes, 0, 0, tiled=True) for t in self.blocks.join(out)]
        gathered = [_axes.all_gather(t, mesh_axes, True) for t in self.wholes.join(whole)]
        return self._together(list(self.blocks.parts(moved)), list(self.wholes.parts(gathered)))


def normalized(spec: Any, ndim: int) -> tuple[tuple[Hashable, ...] | None, ...]:
    """A `PartitionSpec` written out for every axis, each entry a tuple of mesh axes (or None)."""
    entries = (*spec, *(None,) * (ndim - len(spec)))
    return tuple(None if e is None else tuple(e) if isinstance(e, tuple) else (e,) for e in entries)


__all__: list[str] = []
