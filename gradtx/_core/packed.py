"""`Packed` trees: `pack` (one concatenation per buffer, placed like the leaves) and `unpack` (views)."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gradtx._core import protocol as _protocol
from gradtx._core.packed_layout import (
    MAX_LEAF_SIZE,
    Layout,
    _from_local,
    _group_members,
    _is_leaf,
    _paths,
    _to_local,
    layout_of,
)


@jax.tree_util.register_pytree_with_keys_class
class Packed:
    """A tree kept as a few buffers: `buffers` (packed groups, then loose leaves) and a static `layout`.

    A pytree whose leaves are the buffers, so `jax.tree.map`, `jit`, `grad`, donation and
    every element-wise transform work on it as on any tree; `unpack` gives the leaves.
    """

    __slots__ = ("buffers", "layout")

    def __init__(self, buffers: tuple, layout: Layout):
        self.buffers, self.layout = tuple(buffers), layout

    def tree_flatten_with_keys(self):
        """The buffers, keyed `.buffer0`, `.buffer1`, ...; the layout is the static part."""
        keys = [jax.tree_util.GetAttrKey(f"buffer{i}") for i in range(len(self.buffers))]
        return tuple(zip(keys, self.buffers, strict=True)), self.layout

    def tree_flatten(self):
        """The buffers (children) and the layout (static)."""
        return self.buffers, self.layout

    @classmethod
    def tree_unflatten(cls, layout, children):
        """A `Packed` from its layout and buffers (any placeholders, as tree utilities pass)."""
        obj = object.__new__(cls)  # children may be any placeholders (tree utilities, checkpointers)
        obj.buffers, obj.layout = tuple(children), layout
        return obj

    def __contains__(self, key: Any) -> bool:
        """Whether the packed tree is a dict with `key` at its top (Flax's `TrainState` asks its params)."""
        top = self.layout.treedef.unflatten([None] * self.layout.treedef.num_leaves)
        return isinstance(top, dict) and key in top

    def __repr__(self) -> str:
        shapes = ", ".join(f"{getattr(b, 'dtype', '?')}{list(getattr(b, 'shape', ()))}" for b in self.buffers)
        leaves = sum(1 for e in self.layout.entries if e is not None)
        return f"Packed({leaves} leaves in {len(self.buffers)} buffers: {shapes})"


def is_packed(x: Any) -> bool:
    """True for a `Packed` tree.

    Args:
      x: anything.

    Returns:
      Whether `x` is a `Packed`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> packed = gradtx.packing.pack({"w": jnp.ones(3)})
        >>> gradtx.packing.is_packed(packed), gradtx.packing.is_packed(jnp.ones(3))
        (True, False)
    """
    return isinstance(x, Packed)


# --------------------------------------------------------------------------- pack


def pack(tree: Any, *, layout: Layout | None = None, max_leaf_size: int = MAX_LEAF_SIZE) -> Packed:
    """Pack the small float leaves of `tree` into a few contiguous buffers, grouped by dtype and sharding.

    Call it once on the parameters, outside the jitted step, and keep them packed: the
    optimizer's state (`tx.init(packed)`), the gradients (`jax.grad` through `unpack`) and
    the updates come out packed too. With `layout`, pack another tree into the same layout
    (e.g. gradients computed leaf by leaf); `None` leaves become zeros there.

    Args:
      tree: a pytree of arrays (or `jax.ShapeDtypeStruct`s, giving an abstract `Packed`).
      layout: pack into this layout (from another `Packed`'s `.layout`) instead of a new one.
      max_leaf_size: leaves with more elements than this on a device (a sharded leaf counts
        its shard) stay as they are.

    Returns:
      A `Packed` holding the buffers and the layout.

    Raises:
      TypeError: for a bad `layout` or `max_leaf_size`.
      TreeMismatchError: if `tree` does not have the structure or the leaf shapes of `layout`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> params = {f"layer{i}": {"w": jnp.ones((4, 4)), "b": jnp.zeros(4)} for i in range(100)}
        >>> packed = gradtx.packing.pack(params)
        >>> packed
        Packed(200 leaves in 1 buffers: float32[2000])
        >>> gradtx.packing.unpack(packed)["layer7"]["w"].shape
        (4, 4)
    """
    if layout is None:
        if isinstance(max_leaf_size, bool) or not isinstance(max_leaf_size, int) or max_leaf_size < 0:
            raise TypeError(f"`pack`: `max_leaf_size` must be an int >= 0, got {max_leaf_size!r}.")
        layout = layout_of(tree, max_leaf_size=max_leaf_size)
    elif not isinstance(layout, Layout):
        raise TypeError(f"`pack`: `layout` must be a `Layout` (a Packed tree's `.layout`), got {layout!r}.")
    leaves = _leaves_for(layout, tree)
    if leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves if x is not None):
        return Packed(_abstract_buffers(layout, leaves), layout)
    return Packed(_buffers(layout, leaves), layout)


def _leaves_for(layout: Layout, tree: Any) -> list:
    try:
        leaves = layout.treedef.flatten_up_to(tree)
    except (ValueError, TypeError):
        raise _protocol.TreeMismatchError(
            f"`pack`: the tree does not have the structure of the layout; tree: "
            f"{jax.tree.structure(tree, is_leaf=_is_leaf)}, layout: {layout.treedef}."
        ) from None
    for path_leaf, entry in zip(_paths(layout), zip(leaves, layout.entries, strict=True), strict=True):
        leaf, e = entry
        if e is not None and e[0] == "packed" and leaf is not None and tuple(np.shape(leaf)) != e[3]:
            raise _protocol.TreeMismatchError(
                f"`pack`: the leaf {path_leaf} has shape {tuple(np.shape(leaf))}, "
                f"but the layout holds {e[3]} there."
            )
    return leaves


def _concat_group(layout: Layout, g: int, parts: list) -> jax.Array:
    """Buffer `g` from its members' leaves (in layout order; `None` gives zeros)."""
    group = layout.groups[g]
    local = []
    for i, x in zip(_group_members(layout)[g], parts, strict=True):
        _, _, _, shape, dims = layout.entries[i]
        x = jnp.zeros(shape, group.dtype) if x is None else jnp.asarray(x)
        local.append(_to_local(x, group.sizes, dims))
    return jnp.concatenate(local, axis=-1)


@functools.lru_cache(maxsize=256)
def _placed_concat(layout: Layout, g: int) -> Any:
    """`_concat_group` compiled to put buffer `g` where its leaves are (no data moves between devices)."""
    return jax.jit(functools.partial(_concat_group, layout, g), out_shardings=layout.groups[g].sharding)


def _buffers(layout: Layout, leaves: list) -> tuple:
    """The buffers of `layout` from its leaves: one concatenation per group, placed like the leaves."""
    members = _group_members(layout)
    concrete = not any(isinstance(x, jax.core.Tracer) for x in leaves)
    out = []
    for g, group in enumerate(layout.groups):
        parts = [leaves[i] for i in members[g]]
        out.append(
            _placed_concat(layout, g)(parts)
            if concrete and group.sharding is not None
            else _concat_group(layout, g, parts)
        )
    loose = [x for x, e in zip(leaves, layout.entries, strict=True) if e is not None and e[0] == "loose"]
    return (*out, *loose)


def _abstract_buffers(layout: Layout, leaves: list) -> tuple:
    groups = tuple(jax.ShapeDtypeStruct(g.shape, g.dtype, sharding=g.sharding) for g in layout.groups)
    return (
        *groups,
        *(x for x, e in zip(leaves, layout.entries, strict=True) if e is not None and e[0] == "loose"),
    )


# --------------------------------------------------------------------------- unpack


def _runtime_offsets(layout: Layout, buffers: tuple) -> list:
    """The packed leaves' offsets, as values XLA cannot fold into the slicing kernels.

    They come out of a `lax.cond` on a predicate that is always true but computed from an
    element of a replicated buffer (`v == v or v != v`); with static offsets XLA compiles
    one kernel per leaf. Without a replicated buffer (every group sharded), the offsets are
    static: reading an element of a sharded buffer would need a collective. Run eagerly (on
    concrete buffers, op by op) they are static too: an eager `lax.cond` lowers afresh each call.
    """
    static = [e[2] if e is not None and e[0] == "packed" else 0 for e in layout.entries]
    probe = next((g for g, group in enumerate(layout.groups) if not group.axes), None)
    if probe is None or not isinstance(buffers[probe], jax.core.Tracer):
        return static
    v = buffers[probe][0]
    offsets = tuple(np.int32(o) for o in static)
    always = (v == v) | (v != v)  # noqa: PLR0124  (true, but not to XLA)
    return list(lax.cond(always, lambda: offsets, lambda: tuple(np.int32(0) for _ in offsets)))


def _slices(layout: Layout, buffers: tuple) -> list:
    offsets = _runtime_offsets(layout, buffers)
    out: list[jax.Array | None] = []
    for i, e in enumerate(layout.entries):
        if e is None or e[0] == "loose":
            out.append(None)
            continue
        _, g, _, shape, dims = e
        group, buf = layout.groups[g], buffers[g]
        size = math.prod(shape) // (math.prod(group.sizes) if group.sizes else 1)
        part = lax.dynamic_slice_in_dim(buf, offsets[i], size, axis=buf.ndim - 1)
        out.append(_from_local(part, group.sizes, dims, shape))
    return out


def _packed_views(layout: Layout, group_buffers: tuple) -> list:
    """`_slices` whose backward concatenates the cotangents (autodiff's own transpose would pad each one)."""

    @jax.custom_vjp
    def views(buffers):
        return _slices(layout, buffers)

    def fwd(buffers):
        return views(buffers), None

    def bwd(_, cotangents):
        members = _group_members(layout)
        return (tuple(_concat_group(layout, g, [cotangents[i] for i in m]) for g, m in enumerate(members)),)

    views.defvjp(fwd, bwd)
    return views(group_buffers)


def _batch_dims(packed: Packed) -> int:
    """How many leading dims every buffer has beyond its layout's (e.g. a window of slots per leaf: 1)."""
    extra = set()
    groups = packed.layout.groups
    for i, (group, buf) in enumerate(zip(groups, packed.buffers[: len(groups)], strict=True)):
        shape = tuple(np.shape(buf))
        k = len(shape) - len(group.shape)
        if k < 0 or shape[k:] != group.shape:
            raise ValueError(
                f"`unpack`: buffer {i} has shape {shape}, but its layout was made for "
                f"{group.shape}; pack the parameters where they are unpacked (e.g. inside "
                f"`shard_map` for per-device shards)."
            )
        extra.add(k)
    if len(extra) > 1:
        raise ValueError(
            f"`unpack`: the buffers have different leading dims ({sorted(extra)} beyond the layout's)."
        )
    return extra.pop() if extra else 0


def _unpack_one(packed: Packed) -> Any:
    if _batch_dims(packed):  # e.g. a window of slots stacked on each buffer: unpacked for each entry
        return jax.vmap(lambda buffers: _unpack_one(Packed(buffers, packed.layout)))(packed.buffers)
    layout = packed.layout
    n = len(layout.groups)
    views = _packed_views(layout, tuple(packed.buffers[:n])) if n else [None] * len(layout.entries)
    leaves: list[Any] = []
    for e, view in zip(layout.entries, views, strict=True):
        if e is None:
            leaves.append(None)
        elif e[0] == "loose":
            leaves.append(packed.buffers[e[1]])
        else:
            leaves.append(view)
    return layout.treedef.unflatten(leaves)


def unpack(tree: Any) -> Any:
    """The leaves of a `Packed` tree as views, in the structure it was packed from (differentiable).

    Call it inside the jitted loss: the model reads its leaves from the views, and the
    gradient with respect to the `Packed` comes out packed (the backward concatenates the
    leaves' gradients, one pass). Any tree containing `Packed` nodes may be given; each is
    replaced by its leaves, the rest is returned as it is.

    Args:
      tree: a `Packed`, or a tree containing some.

    Returns:
      The tree with every `Packed` replaced by its unpacked leaves.

    Buffers with leading dims beyond their layout's (every buffer the same number: a
    window of slots stacked per buffer, as GGT keeps) give leaves with those leading dims.

    Raises:
      ValueError: if a buffer's shape differs from its layout's (e.g. a globally packed
        tree passed into `shard_map` as per-device shards).

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> packed = gradtx.packing.pack({"w": jnp.ones((2, 3)), "b": jnp.zeros(3)})
        >>> loss = lambda p: jnp.sum(gradtx.packing.unpack(p)["w"] ** 2)
        >>> grads = jax.grad(loss)(packed)  # packed like the params
        >>> grads
        Packed(2 leaves in 1 buffers: float32[9])
        >>> gradtx.packing.unpack(grads)["w"]
        Array([[2., 2., 2.],
               [2., 2., 2.]], dtype=float32)
    """
    if is_packed(tree):
        return _unpack_one(tree)
    return jax.tree.map(lambda x: _unpack_one(x) if is_packed(x) else x, tree, is_leaf=is_packed)


def repack(tree: Any, like: Any) -> Any:
    """`tree` (unpacked) packed again wherever `like` holds a `Packed` node, with its layout.

    For a transform that computed its updates on unpacked views (`leaf_wise`); `None`
    leaves of `tree` become zeros in the buffers.
    """
    if is_packed(like):
        return pack(tree, layout=like.layout)
    treedef: Any  # a PyTreeDef (jax's annotations leave its type unresolved)
    nodes, treedef = jax.tree_util.tree_flatten(like, is_leaf=lambda x: x is None or is_packed(x))
    if not any(is_packed(x) for x in nodes):
        return tree
    parts = treedef.flatten_up_to(tree)
    return treedef.unflatten(
        [pack(p, layout=n.layout) if is_packed(n) else p for p, n in zip(parts, nodes, strict=True)]
    )


def has_packed(tree: Any) -> bool:
    """True when `tree` is or contains a `Packed`."""
    return any(is_packed(x) for x in jax.tree.leaves(tree, is_leaf=is_packed))


def leaf_wise(tx: Any) -> _protocol.GradientTransformation:
    """`tx` as a transform that accepts packed trees, giving it per-leaf views of them.

    An `ElementWise` or `LeafWise` transform is returned as it is. Any other (a per-tensor
    rule, a mask, a foreign transform) is wrapped: given `Packed` updates and params, it
    runs on their unpacked views, its state is kept leaf by leaf, and its updates are
    packed again. Every gradtx factory and combinator applies this to what it builds or
    wraps, so no transform ever sees packed buffers unless it treats elements alike.

    Args:
      tx: a transform whose `update` accepts extra keyword arguments.

    Returns:
      `tx`, or a `LeafWise` transform with the same numbers on packed trees.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> norm_each = gradtx.GradientTransformation(  # a per-tensor rule written by hand
        ...     lambda p: gradtx.EmptyState(),
        ...     lambda u, s, p=None, **kw: ({k: v / jnp.linalg.norm(v) for k, v in u.items()}, s))
        >>> tx = gradtx.packing.leaf_wise(norm_each)
        >>> grads = gradtx.packing.pack({"a": jnp.array([3.0, 4.0]), "b": jnp.array([0.0, 2.0])})
        >>> out, _ = tx.update(grads, tx.init(grads))
        >>> gradtx.packing.unpack(out)["a"], gradtx.packing.unpack(out)["b"]
        (Array([0.6, 0.8], dtype=float32), Array([0., 1.], dtype=float32))
    """
    if isinstance(tx, (_protocol.ElementWise, _protocol.LeafWise)):
        return tx

    def init_fn(params):
        return tx.init(unpack(params))

    def update_fn(updates, state, params=None, **extra_args):
        if not has_packed(updates):
            return tx.update(updates, state, params, **extra_args)
        out, state = tx.update(unpack(updates), state, unpack(params), **extra_args)
        return repack(out, updates), state

    return _protocol.LeafWise(init_fn, update_fn)
