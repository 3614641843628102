"""Run an element-wise transform on packed leaves: `fused` (what the aliases return) and `unfused`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _packing, _tree


class FusedState(NamedTuple):
    """State of `fused`."""

    inner: Any  # the inner transform's state, its slots as `PackedTree`s (gradtx.get_slot unpacks them)
    token: Any  # an int32 scalar, always 0: makes the unpacking offsets runtime values (see _packing)
    layout: _packing.Static  # the packing (static: part of the tree structure, no arrays)


@_base.api
def fused(tx: Any, *, max_packed_size: int = _packing.MAX_PACKED_SIZE) -> _base.GradientTransformation:
    """Run an element-wise transform on a few contiguous buffers instead of many small leaves.

    The parameters with at most `max_packed_size` elements are packed, per dtype, into one
    flat buffer each; `tx` runs on those buffers (and on the large leaves as they are), and
    keeps its state packed across steps. Each step packs the gradients (one concatenation
    per dtype) and unpacks the updates (one slice per leaf, fused by XLA with
    `apply_updates`' addition), so step time and compile time stay nearly flat as the
    number of leaves grows, and the numbers are those of `tx` on the leaves.

    Every alias of the catalogue returns its chain wrapped in `fused`; use `unfused(tx)`
    to get the per-leaf transform back. Transforms that look at leaves one by one (per
    tensor norms, key-path masks, LARS, Shampoo, GGT, optax's) are returned unchanged.
    A step whose gradient leaves a packed parameter without a dense gradient (`None`, a
    `RowSparse`, another dtype) runs `tx` leaf by leaf on unpacked state, so TF's sparse
    rules hold; keep large embedding tables above `max_packed_size` to keep such steps
    O(touched rows).

    Args:
      tx: the transform (usually a chain of gradtx building blocks).
      max_packed_size: leaves with more elements than this stay unpacked.

    Returns:
      `tx` itself if it is not packable, else a `GradientTransformation` with state
      `FusedState(inner, token, layout)`.

    Raises:
      TypeError: for a bad `tx` or `max_packed_size`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> params = {f"bias{i}": jnp.zeros(3) for i in range(100)}
        >>> state = gradtx.adam(0.1).init(params)  # the aliases are fused
        >>> state.inner[0].m.buffers[0].shape  # one buffer for the 100 leaves
        (300,)
        >>> gradtx.get_slot(state, "m")["bias7"].shape  # unpacked by name, as TF's get_slot
        (3,)
    """
    fn = "fused"
    _base.check_transform(fn, "tx", tx)
    _base.check_int(fn, "max_packed_size", max_packed_size, minimum=0)
    if not _base.is_packable(tx):
        return tx
    inner = _base.with_extra_args_support(tx)
    needs_params = _base.reads_params(tx)

    def init_fn(params):
        layout = _packing.layout_of(params, max_packed_size)
        return FusedState(inner.init(_packing.pack(params, layout)), _packing.new_token(), _packing.Static(layout))

    def per_leaf_step(updates, state, params, layout, extra_args):
        """The step of `tx` on the unpacked state, packed again afterwards (exact sparse and None semantics)."""
        offsets = _packing.runtime_offsets(layout, state.token)
        unpacked = _packing.map_packed(lambda t: _packing.unpack(t, offsets), state.inner)
        out, new_inner = inner.update(updates, unpacked, params, **extra_args)
        return out, FusedState(_repack(state.inner, new_inner, layout), state.token, state.layout)

    def update_fn(updates, state, params=None, **extra_args):
        layout = state.layout.value
        try:
            grads = layout.treedef.flatten_up_to(updates)
        except (ValueError, TypeError):
            raise _base.TreeMismatchError(
                f"`{fn}`: the updates do not have the structure of the params this state was made for; "
                f"updates: {jax.tree.structure(updates)}, params: {layout.treedef}."
            ) from None
        dense = all(
            slot[0] != "packed" or (g is not None and not _tree.is_row_sparse(g) and jnp.dtype(g.dtype).name == slot[1])
            for g, slot in zip(grads, layout.slots)
        )
        if not dense:
            return per_leaf_step(updates, state, params, layout, extra_args)
        packed_params = _packing.pack(params, layout) if (params is not None and needs_params) else None
        out, new_inner = inner.update(_packing.pack(updates, layout), state.inner, packed_params, **extra_args)
        out = _packing.unpack(out, _packing.runtime_offsets(layout, state.token))
        return out, FusedState(new_inner, state.token, state.layout)

    fused_tx = _base.GradientTransformation(init_fn, update_fn)
    update_fn._gradtx_unfused = tx
    return fused_tx


def _repack(old: Any, new: Any, layout: _packing.Layout) -> Any:
    """`new` (a per-leaf state) packed where `old` (its packed counterpart) holds `PackedTree`s."""
    if _packing.is_packed(old):
        return _packing.pack(new, layout)
    if jax.tree_util.treedef_is_leaf(jax.tree.structure(old)):
        return new
    children, treedef = jax.tree_util.tree_flatten(old, is_leaf=lambda x: x is not old)
    return treedef.unflatten([_repack(o, n, layout) for o, n in zip(children, treedef.flatten_up_to(new))])


@_base.api
def unfused(tx: Any) -> _base.GradientTransformation:
    """The per-leaf transform inside a `fused` one (an alias's chain without packing); other transforms as they are.

    Use it for a state laid out leaf by leaf (e.g. to mix with code that walks optax-style
    states), or to compare the two paths; the numbers are the same.

    Args:
      tx: any transform.

    Returns:
      The transform `fused` was given, or `tx` itself when it is not fused.

    Raises:
      TypeError: if `tx` is not a transform.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> type(gradtx.adam(1e-3).init({"w": jnp.zeros(2)})).__name__
        'FusedState'
        >>> type(gradtx.unfused(gradtx.adam(1e-3)).init({"w": jnp.zeros(2)})).__name__
        'tuple'
    """
    _base.check_transform("unfused", "tx", tx)
    return getattr(tx.update, "_gradtx_unfused", tx)
