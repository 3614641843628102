"""Packed parameters: many small leaves kept in a few contiguous buffers (the one packing edge of gradtx).

A model with thousands of small leaves pays per leaf on every step: a kernel (and its
launch) per leaf and per slot, and compile time that grows with the number of leaves.
`pack` keeps such parameters in a few buffers instead, grouped by dtype and by sharding,
and `unpack` gives the model its leaves back as views, inside the jitted loss::

    packed = gradtx.packing.pack(params)            # once, outside the step
    state = tx.init(packed)

    @jax.jit
    def step(packed, state, batch):
        grads = jax.grad(lambda p: loss(gradtx.packing.unpack(p), batch))(packed)  # arrive packed
        updates, state = tx.update(grads, state, packed)                           # a few buffers
        return gradtx.apply_updates(packed, updates), state

Element-wise transforms (`gradtx.ElementWise`: Adam, momentum, a global-norm clip, ...)
run on the buffers as they are, with the per-leaf numbers; a leaf-wise one (LARS, a mask,
`clip_by_norm`, a foreign transform) is given per-leaf views by `leaf_wise`, so a chain
mixes both. Nothing else in gradtx packs, concatenates or reshapes leaves.

Where the loop keeps its parameters leaf by leaf (`nnx.Optimizer`, Flax's `TrainState`),
`packed(tx)` is a transform over ordinary trees whose state is packed: each update packs
the gradients, runs `tx` on the buffers and gives the updates back leaf by leaf.

Layout. Leaves of a float dtype with at most `max_leaf_size` elements on a device (a
sharded leaf counts its shard) are packed; the others (large leaves, integer leaves, empty
ones) are kept as they are, as their own buffers. A buffer holds the leaves of one dtype
and one placement: leaves on one device (or replicated) are flattened into a 1-D buffer;
leaves sharded over mesh axes `(a1, ..., am)` (a `NamedSharding`) go into a buffer of shape
`(k1, ..., km, length)` sharded `P(a1, ..., am, None)`, each device's shard of every leaf
flattened into that device's row. Packing and unpacking then move no data between devices.
On a mesh of Explicit axes (sharding in types, `jax.make_mesh`'s default) a leaf sharded
over them is kept as it is, its type fixing the sharding of every reshape, whether it is a
placed array or a traced one (`packed(tx)` packs under `jit`); its replicated leaves are packed.

Views. `unpack` slices each leaf out at an offset that XLA sees as a runtime value (the
output of a `lax.cond` it cannot fold), so all leaves of one shape share one compiled
kernel and compile time stays flat in the number of leaves; its backward concatenates the
leaves' cotangents into the buffers (one pass), so gradients arrive packed. (Slicing a
buffer with static offsets compiles one kernel per leaf; letting autodiff transpose the
slices pads every cotangent to the whole buffer.)
"""

from gradtx._core.packed import Packed, has_packed, is_packed, leaf_wise, pack, repack, unpack  # noqa: F401  (for gradtx)
from gradtx._core.packed_layout import MAX_LEAF_SIZE, Group, Layout, layout_of  # noqa: F401  (Group: see Layout)
from gradtx.packing import _flax
from gradtx.packing._wrapped import packed, without_variables  # noqa: F401  (for gradtx)

_flax.register()  # Flax's serialization stores packed trees leaf by leaf (when Flax is installed)

__all__ = [
    "MAX_LEAF_SIZE",
    "Layout",
    "Packed",
    "is_packed",
    "layout_of",
    "leaf_wise",
    "pack",
    "packed",
    "unpack",
]
