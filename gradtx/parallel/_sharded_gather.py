"""How `sharded_state` inside `shard_map` / `pmap` keeps state leaves that a replica needs whole.

- `gather_state=True`: a rule that needs whole tensors keeps 1/N of its state between steps and
  gathers the whole state for the step (`update`). A step all-reduces the gradients (as
  `cross_shard`), all-gathers the state (a large leaf alone, the small ones of a dtype joined in one),
  runs the rule on whole tensors on every replica, and keeps this replica's slice of the new state:
  the unsharded numbers, 1/N of the state stored, at the cost of a gather of the state per step. The
  rule's per-matrix work (Muon's Newton-Schulz, Shampoo's and SOAP's preconditioning, PSGD Kron's
  factors) is split over the replicas as `split_matrix_work` splits it (its matrices are the same on
  all of them): each computes 1/N of the matrices, and one all-gather per shape and dtype gives every
  replica the results; the rest of the rule is repeated.
- An element-wise rule's own leaves -- state not shaped by the params, such as a PRNG key or
  Mechanic's per-decay scales (`own_leaves`) -- are the same on every replica: they are stored cut
  like the slots and gathered for the step, so that every leaf of the state is laid out alike.

Either way the state is laid out as `_sharded_layout` says: every leaf flattened, zero-padded and cut
in N slices, one per replica, and a scalar repeated -- so `unshard_state` / `shard_state` move it
between topologies.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import matrix_work as _matrix_work
from gradtx._core import walk as _walk
from gradtx.parallel import _axes
from gradtx.parallel import _matrix_blocks as _blocks
from gradtx.parallel import _matrix_work as _split
from gradtx.parallel._sharded_layout import my_slice, row


def stored(state: Any, n: int, axes: tuple, cut: Any = None) -> Any:
    """A state as this replica keeps it, each leaf a row: cut to its slice where `cut` says (a list of
    flags in leaf order; default: every leaf but a scalar, which is kept as its copy)."""
    leaves, treedef = jax.tree.flatten(state)
    flags = cut if cut is not None else [jnp.ndim(x) > 0 for x in leaves]
    kept = [
        row(my_slice(jnp.asarray(x), n, axes) if c else x, axes) for x, c in zip(leaves, flags, strict=True)
    ]
    return jax.tree.unflatten(treedef, kept)


def own_leaves(inner: Any, slices: Any, whole: Any) -> tuple[list[bool], list[Any]]:
    """Which leaves of `inner`'s state are its own (shaped alike for the slices and for the whole params:
    not a slot), and the whole state's leaves' shapes; traced only."""
    on_slices = jax.tree.leaves(jax.eval_shape(inner.init, slices))
    on_whole = jax.tree.leaves(jax.eval_shape(inner.init, whole))
    if len(on_slices) != len(on_whole):  # a state whose structure follows the shapes: every leaf as it is
        return [False] * len(on_slices), on_slices
    own = [len(a.shape) > 0 and a.shape == b.shape for a, b in zip(on_slices, on_whole, strict=True)]
    return own, on_whole


def with_whole(kept: Any, own: list[bool], like: list[Any], axes: tuple, checked: bool) -> Any:
    """`kept` (this replica's state, rows dropped) with its own leaves gathered whole."""
    leaves, treedef = jax.tree.flatten(kept)
    idx = [i for i, o in enumerate(own) if o]
    gathered = whole_state([leaves[i] for i in idx], [like[i] for i in idx], axes, checked)
    for i, x in zip(idx, gathered, strict=True):
        leaves[i] = x
    return jax.tree.unflatten(treedef, leaves)


JOINED_BYTES = 1 << 20
"""A state leaf smaller than this (whole) is gathered with the others of its dtype in one buffer: one
all-gather for the many small leaves (counts, scalars, keys, biases' slots), whose collectives would cost
more than their bytes; a larger one is gathered on its own, straight into its buffer (joining it would
copy the whole state once more)."""


def whole_state(kept: Any, like: Any, axes: tuple, checked: bool) -> Any:
    """The whole state from this replica's slices (`kept`, rows dropped), shaped as `like`: an all-gather
    per leaf of `JOINED_BYTES` or more, and one for the smaller leaves of each dtype, joined in one buffer
    (a scalar's copies too, so that it is the same value on all replicas, typed so under
    `check_vma=True`)."""
    leaves, treedef = jax.tree.flatten(kept)
    shapes = [(tuple(s.shape), s.dtype) for s in jax.tree.leaves(like)]
    out: list[Any] = [None] * len(leaves)
    alone: list[int] = []
    small: list[int] = []
    for i, (shape, dtype) in enumerate(shapes):
        if math.prod(shape) == 0:
            out[i] = jnp.zeros(shape, dtype)
        else:
            (alone if math.prod(shape) * jnp.dtype(dtype).itemsize >= JOINED_BYTES else small).append(i)
    for i in alone:  # straight into its own buffer
        size = math.prod(shapes[i][0])
        out[i] = _axes.all_gather(jnp.reshape(leaves[i], (-1,)), axes, checked)[:size].reshape(shapes[i][0])
    if small:
        rows = [jnp.reshape(leaves[i], (1, -1)) for i in small]  # this replica's row of each leaf
        buffers = _blocks.Buffers.of(rows, joined=True)  # one per dtype
        gathered = buffers.parts([_axes.all_gather(b, axes, checked) for b in buffers.join(rows)])
        for i, full in zip(small, gathered, strict=True):  # the leaf's rows, replica by replica
            out[i] = jnp.reshape(full, (-1,))[: math.prod(shapes[i][0])].reshape(shapes[i][0])
    return jax.tree.unflatten(treedef, out)


def update(
    fn: str,
    inner: Any,
    updates: Any,
    state: Any,
    params: Any,
    extra_args: dict,
    *,
    axes: tuple,
    n: int,
    reduction: str,
    replicated_grads: str | None,
) -> tuple[Any, Any]:
    """One step of `inner` on whole tensors: `(updates, the new state as this replica keeps it)`."""
    checked = _axes.vma_checked(axes)
    _axes.check_replicated(fn, updates, axes, checked, replicated_grads)
    grads = _walk.map_updates(
        fn,
        lambda g: _axes.reduce_leaf(fn, g, axes, reduction, n, checked, replicated_grads=replicated_grads),
        updates,
    )
    like = jax.eval_shape(inner.init, params if params is not None else grads)
    kept = jax.tree.map(lambda x: x[0], state)
    whole = whole_state(kept, like, axes, checked)
    with _matrix_work.spreading(_split.over_replicas(axes)):  # the same matrices on every replica: split
        out, new = inner.update(grads, whole, params, **extra_args)
    return out, stored(new, n, axes)
