"""`leaf_wise`: a transform that needs whole leaves, given per-leaf views of packed trees."""

from __future__ import annotations

from typing import Any

from gradtx import _protocol
from gradtx.packing._packed import has_packed, repack, unpack


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
