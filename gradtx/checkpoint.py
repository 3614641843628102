"""Save and restore optimizer states and `TrainState`s as plain NumPy `.npz` files.

The arrays are stored under their key paths; restoring needs a *target* with the same
structure (e.g. `tx.init(params)` or `trainer.init(params)`, or `jax.eval_shape` of it),
so NamedTuples, `None` leaves and dtypes come back exactly and a resumed run is
bit-identical. Packed parameters and slots (`gradtx.packing`) are stored leaf by leaf under
the key paths of the leaves they hold, the names an unpacked state gives them, so a
checkpoint moves between packed and unpacked runs. For sharded or very large states use
orbax-checkpoint (`pip install gradtx[checkpoint]`): gradtx states are plain pytrees and
round-trip through `orbax.checkpoint.StandardCheckpointer` unchanged.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import packing

_DTYPES = "__gradtx_dtypes__"


def _nodes(tree: Any) -> list[tuple[str, Any]]:
    """`(key path, leaf or Packed)` of `tree`, a `Packed` taken whole."""
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=packing.is_packed)[0]
    return [(jax.tree_util.keystr(path), node) for path, node in flat]


def _leaves_of(key: str, node: Any, unpack: Any) -> list[tuple[str, Any]]:
    """The `(key path, leaf)` entries of one node: a `Packed` gives its leaves, named as if unpacked."""
    if not packing.is_packed(node):
        return [(key, node)]
    leaves = jax.tree_util.tree_flatten_with_path(unpack(node))[0]
    return [(key + jax.tree_util.keystr(sub), leaf) for sub, leaf in leaves]


def _entries(tree: Any) -> list[tuple[str, Any]]:
    return [e for key, node in _nodes(tree) for e in _leaves_of(key, node, packing.unpack)]


def save_npz(path: str | os.PathLike, tree: Any) -> None:
    """Write every array of `tree` to `path` (an `.npz` file), keyed by its key path.

    Args:
      path: the file to write.
      tree: a pytree of arrays (optimizer state, `TrainState`, params).

    Raises:
      TypeError: for a leaf that is not an array (e.g. a typed PRNG key: store its
        `jax.random.key_data`, as gradtx's own states do).

    Example:
        >>> import tempfile, os, jax.numpy as jnp, gradtx
        >>> tx = gradtx.adam(1e-3)
        >>> state = tx.init({"w": jnp.ones(2)})
        >>> path = os.path.join(tempfile.mkdtemp(), "state.npz")
        >>> gradtx.checkpoint.save_npz(path, state)
        >>> restored = gradtx.checkpoint.load_npz(path, tx.init({"w": jnp.zeros(2)}))
        >>> bool((gradtx.get_slot(restored, "m", "w") == gradtx.get_slot(state, "m", "w")).all())
        True
    """
    arrays: dict[str, Any] = {}
    dtypes: dict[str, str] = {}
    for key, leaf in _entries(tree):
        if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            raise TypeError(
                f"`save_npz`: the leaf {key} is a typed PRNG key; store `jax.random.key_data(key)` instead."
            )
        value = np.asarray(leaf)
        dtypes[key or "<root>"] = value.dtype.name
        if value.dtype.kind == "V":  # bfloat16 and other ml_dtypes: NumPy stores their bits
            value = value.view(f"u{value.dtype.itemsize}")
        arrays[key or "<root>"] = value
    arrays[_DTYPES] = np.asarray(json.dumps(dtypes))
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def load_npz(path: str | os.PathLike, target: Any) -> Any:
    """Read a tree written by `save_npz`, with the structure, shapes and dtypes of `target`.

    Args:
      path: the file to read.
      target: a tree of the expected structure: arrays or `jax.ShapeDtypeStruct`s.

    Returns:
      The restored tree (jax arrays).

    Raises:
      ValueError: if the file's key paths, shapes or dtypes differ from `target`'s (the
        message names the first differences).

    Example:
        >>> import tempfile, os, jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.momentum(0.1, 0.9)
        >>> path = os.path.join(tempfile.mkdtemp(), "state.npz")
        >>> gradtx.checkpoint.save_npz(path, tx.init({"w": jnp.ones(2)}))
        >>> target = jax.eval_shape(tx.init, {"w": jnp.ones(2)})  # shapes alone will do
        >>> gradtx.get_slot(gradtx.checkpoint.load_npz(path, target), "momentum", "w")
        Array([0., 0.], dtype=float32)
    """
    with np.load(path) as data:
        stored = {k: data[k] for k in data.files}
    dtypes = json.loads(str(stored.pop(_DTYPES))) if _DTYPES in stored else {}
    for key, name in dtypes.items():
        if stored[key].dtype.name != name:  # stored as bits
            stored[key] = stored[key].view(jnp.dtype(name))
    nodes = _nodes(target)
    shapes = [_leaves_of(key, node, lambda p: jax.eval_shape(packing.unpack, p)) for key, node in nodes]
    entries = [e for part in shapes for e in part]
    wanted = {k or "<root>" for k, _ in entries}
    missing, extra = sorted(wanted - set(stored)), sorted(set(stored) - wanted)
    if missing or extra:
        raise ValueError(
            f"`load_npz`: {path} does not match the target: missing {missing[:8]}, unexpected {extra[:8]}."
        )
    leaves: list[Any] = []
    for (_, node), part in zip(nodes, shapes, strict=True):
        arrays = []
        for key, like in part:
            value = stored[key or "<root>"]
            if tuple(value.shape) != tuple(like.shape) or value.dtype != np.dtype(like.dtype):
                raise ValueError(
                    f"`load_npz`: {key} is {value.dtype}{list(value.shape)} in {path}, "
                    f"but the target wants {np.dtype(like.dtype)}{list(like.shape)}."
                )
            arrays.append(jnp.asarray(value))
        if packing.is_packed(node):  # the leaves packed again, into the target's layout
            tree = jax.tree.unflatten(jax.tree.structure(jax.eval_shape(packing.unpack, node)), arrays)
            leaves.append(packing.pack(tree, layout=node.layout))
        else:
            leaves.append(arrays[0])
    return jax.tree.unflatten(jax.tree.structure(target, is_leaf=packing.is_packed), leaves)


__all__ = ["load_npz", "save_npz"]
