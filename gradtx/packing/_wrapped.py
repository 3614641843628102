"""`packed`: a transform over ordinary trees that runs on packed buffers (`nnx.Optimizer`, `TrainState`)."""

from __future__ import annotations

import sys
from typing import Any

import jax

from gradtx._core import protocol as _protocol
from gradtx._core.packed import has_packed, is_packed, leaf_wise, pack, unpack
from gradtx._core.packed_layout import MAX_LEAF_SIZE, Layout, layout_of


def without_variables(tree: Any) -> Any:
    """`tree` with each Flax NNX `Variable` replaced by its value (as `nnx.Optimizer` updates its state)."""
    nnx = sys.modules.get("flax.nnx")  # not imported: the tree holds no NNX variables
    return tree if nnx is None else nnx.as_pure(tree)


def _layout_in(state: Any) -> Layout | None:
    """The layout of the first `Packed` node in `state` (every one was packed from the params)."""
    return next((x.layout for x in jax.tree.leaves(state, is_leaf=is_packed) if is_packed(x)), None)


def packed(tx: Any, *, max_leaf_size: int = MAX_LEAF_SIZE) -> _protocol.GradientTransformation:
    """`tx` run on packed buffers, for callers that keep their parameters and gradients leaf by leaf.

    Use it where the training loop is not yours to change: `nnx.Optimizer`, Flax's
    `TrainState`, `optax.chain`. The state is packed once, at `init` (`tx.init` of the packed
    params); each `update` packs the gradients into the state's layout (one concatenation
    per buffer), runs `tx` on the buffers and returns the updates leaf by leaf (views, added
    to the params leaf by leaf). Under `jit` the step keeps one kernel per leaf (the
    `apply_updates` addition) and runs `tx` itself on a few buffers.

    The numbers are `tx`'s on the unpacked tree. Element-wise gradtx transforms (Adam,
    momentum, a global-norm clip, ...) run on the buffers; any other is given per-leaf views
    (`leaf_wise`), correct but with no gain. A model whose parameters can stay packed
    (`pack`, and `unpack` inside the loss) also gets its gradients packed and skips the
    per-leaf additions: faster still.

    Args:
      tx: the transform to run on the buffers.
      max_leaf_size: leaves with more elements than this on a device (a sharded leaf counts
        its shard) stay as they are.

    Returns:
      A `GradientTransformation` over unpacked trees whose state holds `Packed` trees
      (`get_slot` and `slots` show them leaf by leaf). `None` gradient leaves count as zeros.

    Raises:
      TypeError: for a bad `max_leaf_size`, or, at `init`, params that are already packed
        (give those to `tx` itself).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> params = {f"layer{i}": {"w": jnp.ones((4, 4)), "b": jnp.zeros(4)} for i in range(100)}
        >>> tx = gradtx.packing.packed(gradtx.adam(0.1))
        >>> state = tx.init(params)
        >>> state[0].m
        Packed(200 leaves in 1 buffers: float32[2000])
        >>> updates, state = tx.update(params, state, params)  # gradients leaf by leaf
        >>> updates["layer7"]["w"].shape
        (4, 4)
        >>> gradtx.get_slot(state, "m", "layer7/b").shape
        (4,)
    """
    if isinstance(max_leaf_size, bool) or not isinstance(max_leaf_size, int) or max_leaf_size < 0:
        raise TypeError(f"`packed`: `max_leaf_size` must be an int >= 0, got {max_leaf_size!r}.")
    inner = leaf_wise(tx)

    def init_fn(params):
        params = without_variables(params)  # the gradients come without
        if has_packed(params):
            raise TypeError(
                "`packed`: the params are already packed; give them to the transform itself "
                "(`tx.init(packed_params)`), `packed(tx)` is for params kept leaf by leaf."
            )
        return inner.init(pack(params, max_leaf_size=max_leaf_size))

    def update_fn(updates, state, params=None, **extra_args):
        layout = _layout_in(state)
        if layout is None:  # a state with no slots (sgd): any layout of the gradients will do
            layout = layout_of(updates, max_leaf_size=max_leaf_size)
        params = None if params is None else pack(params, layout=layout)  # unused: removed under jit
        out, state = inner.update(pack(updates, layout=layout), state, params, **extra_args)
        return unpack(out), state

    return _protocol.GradientTransformation(init_fn, update_fn)
