"""`save_npz` / `load_npz`: any gradtx tree as one `.npz` file, written atomically, read only when it fits.

The file is a zip archive (NumPy's `.npz`): first a small JSON header, `__gradtx__.json`,
listing every leaf (its key path, shape and dtype), the class of every NamedTuple in
the tree (the optimizer's state types) and, when the saver passed it, the name of the
transform that made the state (`transform_name`: `adam`, `nadam`, ...; two optimizers
can share a state class, and a state does not know which made it); then one `.npy` member
per leaf, named by its key path. `load_npz` reads the header, compares it with the target
and refuses any difference before it reads a single array; it then checks each member's
own `.npy` header against the listing before reading its data, so a file can never make it
allocate more than the target holds (`_npz_file`: only a regular file is opened, and every
read is bounded before it is made). bfloat16 and the other ml_dtypes are stored as their
bits (unsigned integers of the same width) and the header keeps their names.

`save_npz` writes a temporary file in the same directory, flushes and fsyncs it, renames it
over `path` (`os.replace`, atomic on POSIX and Windows) and fsyncs the directory: a crash
or a `kill -9` at any moment leaves either the old checkpoint or the new one, never a
truncated file (a killed writer may leave its temporary `.<name>.<pid>.<hex>.tmp` beside it,
which nothing reads).

Files of the first format (no header; a `__gradtx_dtypes__` member) are still read, with the
names, shapes and dtypes checked from the members' own `.npy` headers.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import IO, Any

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import packing
from gradtx._core import checks as _checks
from gradtx.checkpoint import _common
from gradtx.checkpoint import _npz_file as _file
from gradtx.checkpoint._common import CheckpointError
from gradtx.checkpoint._npz_file import FORMAT, HEADER, LEGACY_DTYPES, VERSION


def _entries(tree: Any) -> list[tuple[str, Any]]:
    return [e for key, node in _common.nodes(tree) for e in _common.leaves_of(key, node, packing.unpack)]


def _to_numpy(key: str, leaf: Any) -> np.ndarray:
    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        raise TypeError(
            f"`save_npz`: the leaf {key} is a typed PRNG key; store `jax.random.key_data(key)` instead."
        )
    value = np.asarray(leaf)
    if value.dtype.kind in "OUSM" or (value.dtype.kind == "V" and value.dtype.itemsize not in (1, 2, 4, 8)):
        raise TypeError(
            f"`save_npz`: the leaf {key} is not a numeric array ({type(leaf).__name__} of dtype "
            f"{value.dtype}); a checkpoint holds arrays only."
        )
    return value


def _stored(value: np.ndarray) -> np.ndarray:
    """bfloat16 and the other ml_dtypes as their bits: `.npy` files know NumPy's own dtypes only."""
    return value.view(_file.stored_dtype(value.dtype))


def save_npz(path: str | os.PathLike, tree: Any, *, transform: Any = None) -> None:
    """Write every array of `tree` to `path` (an `.npz` file), keyed by its key path, atomically.

    The file also records each leaf's shape and dtype, the class of each state in the
    tree and, given `transform`, its name (`transform_name`), which `load_npz` checks: pass
    it whenever `tree` is a transform's state (or a `TrainState`), since the state alone does
    not say which transform made it (`adam`'s and `nadam`'s are alike). An existing file at
    `path` is replaced only once the new one is complete and on disk: a crash while saving
    leaves the old checkpoint intact.

    Args:
      path: the file to write (no suffix is added).
      tree: a pytree of arrays (optimizer state, `TrainState`, params; packed or not).
      transform: the transform whose state `tree` is (or holds), or the `optimize_loss`
        trainer of a `TrainState`: `load_npz` then refuses to load the file into another
        one's state, or without being told which transform's state it reads. None records
        no name (and nothing is checked).

    Raises:
      TypeError: for a leaf that is not a numeric array (e.g. a typed PRNG key: store its
        `jax.random.key_data`, as gradtx's own states do), or a `transform` that is not one.

    Example:
        >>> import tempfile, os, jax.numpy as jnp, gradtx
        >>> tx = gradtx.adam(1e-3)
        >>> state = tx.init({"w": jnp.ones(2)})
        >>> path = os.path.join(tempfile.mkdtemp(), "state.npz")
        >>> gradtx.checkpoint.save_npz(path, state, transform=tx)
        >>> restored = gradtx.checkpoint.load_npz(path, tx.init({"w": jnp.zeros(2)}), transform=tx)
        >>> bool((gradtx.get_slot(restored, "m", "w") == gradtx.get_slot(state, "m", "w")).all())
        True
    """
    name = None if transform is None else _common.checked_transform_name("save_npz", transform)
    arrays = [(key, _to_numpy(key, leaf)) for key, leaf in _entries(tree)]
    header = {
        "format": FORMAT,
        "version": VERSION,
        "leaves": [{"key": k, "shape": list(v.shape), "dtype": v.dtype.name} for k, v in arrays],
        "types": _common.state_types(tree),
        **({} if name is None else {"transform": name}),  # a key older readers ignore: still version 2
    }

    def write(f: IO[bytes]) -> None:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            zf.writestr(HEADER, json.dumps(header))
            for key, value in arrays:
                with zf.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, _stored(value), allow_pickle=False)

    _common.write_atomically(path, write)


# --------------------------------------------------------------------------- reading


def _spec(like: Any) -> tuple[tuple[int, ...], np.dtype]:
    shape = tuple(like.shape) if hasattr(like, "shape") else np.shape(like)
    dtype = like.dtype if hasattr(like, "dtype") else np.asarray(like).dtype
    return tuple(int(d) for d in shape), np.dtype(dtype)


def _show(dtype: Any, shape: Any) -> str:
    return f"{np.dtype(dtype).name}{list(shape)}"


def _dtype(path: Any, key: str, name: str) -> np.dtype:
    try:
        return np.dtype(jnp.dtype(name))
    except (TypeError, ValueError) as err:
        raise CheckpointError(
            f"`load_npz`: {path} gives {key} the unknown dtype {_file.shown(name)}."
        ) from err


def _check_transform(path: Any, header: dict[str, Any], name: str | None) -> None:
    """The transform that wrote the file (if it says) must be `name`; None: the caller named none."""
    stored = header.get("transform")
    if stored is None or stored == name:
        return
    stored = _file.clip(stored, 200)
    if name is None:
        raise CheckpointError(
            f"`load_npz`: {path} holds the state of `{stored}`, but no `transform` was given to check "
            f"that `target` is the state of `{stored}`: another optimizer's state may have the same layout "
            "but mean something else. Pass `transform=` the transform whose state `target` is, or "
            "`allow_other_transform=True` to load it unchecked."
        )
    raise CheckpointError(
        f"`load_npz`: {path} holds the state of `{stored}`, but `transform` is `{name}`: another "
        "optimizer, whose state may have the same layout but means something else to it. Pass the "
        f"transform that wrote it (`{stored}`), or `allow_other_transform=True` to load it anyway (to "
        "continue a run with another optimizer on purpose)."
    )


def _check_types(path: Any, header: dict[str, Any], wanted: dict[str, str]) -> None:
    if "types" not in header:  # the first format did not record them
        return
    stored = header["types"]
    for key in sorted(set(stored) | set(wanted)):
        if stored.get(key) != wanted.get(key):
            held = _file.clip(stored.get(key, "plain container"))
            raise CheckpointError(
                f"`load_npz`: at {_file.clip(key)} {path} holds a {held}, "
                f"but the target has a {wanted.get(key, 'plain container')} there: "
                "the state of another optimizer (or another tree)."
            )


def _sharded_hint(key: str, saved: tuple[int, ...], shape: tuple[int, ...], types: dict[str, str]) -> str:
    """How to restore a leaf of a `sharded_state` state saved on another number of replicas ("" if not)."""
    inside = any(
        cls == "ShardedState"
        and (at == _common.ROOT or (key.startswith(at) and key[len(at) : len(at) + 1] in ".["))
        for at, cls in types.items()
    )
    if not (inside and saved and shape and saved[0] != shape[0]):
        return ""
    n, m = saved[0], shape[0]
    return (
        f" It is a leaf of a `sharded_state` state, one row per replica: saved on {n} replicas, restored "
        f"on {m}. Load the file in the layout it was saved in, `target=gradtx.parallel.shard_state("
        f"inner.init(params), {n})` (`inner` the transform given to `sharded_state`), then lay it out for "
        f"{m}: `gradtx.parallel.shard_state(gradtx.parallel.unshard_state(restored, inner.init(params)), "
        f"{m})`. (Save `unshard_state`'s result to move between device counts freely; under `jax.jit`, "
        "`sharded_state(inner, axis, mesh=mesh)` keeps every leaf's shape, and "
        "`gradtx.parallel.restore_target` gives the target on any mesh.)"
    )


def load_npz(
    path: str | os.PathLike, target: Any, *, transform: Any = None, allow_other_transform: bool = False
) -> Any:
    """Read a tree written by `save_npz`, with the structure, shapes and dtypes of `target`.

    The file's listing of leaves and state classes is compared with `target` before any
    array is read: every key path, shape and dtype, and the class of every state (a
    `ScaleByAdamState` where the target has one), must agree. A file that names the
    transform that wrote it (`save_npz(..., transform=tx)`) is loaded only into that
    transform's state (`transform_name`): `adam`'s state is refused by `nadam` or
    `lazy_adam`, although the states are alike, and by a call that passes no `transform` to
    check it against, unless `allow_other_transform=True`; `adam(0.1)` and `adam(0.2)` are the
    same transform (a resumed run may change hyperparameters). A file saved without a
    transform, or by an older gradtx, names none and loads into any target it fits. Packed
    and unpacked trees read each other's files.

    Only a regular file is read (symlinks followed): a FIFO, a device, a directory or a file
    of `/proc` is refused before it is opened or read, as is a zip that holds a member twice;
    no read is larger than the target's checkpoint could be.

    Args:
      path: the file to read.
      target: a tree of the expected structure: arrays or `jax.ShapeDtypeStruct` objects.
      transform: the transform whose state `target` is (or holds), or the `optimize_loss`
        trainer of a `TrainState`: the file must have been written by the same one (if it
        names one).
      allow_other_transform: load the file whatever transform wrote it: into another
        transform's state (to continue a run with another optimizer on purpose), or without
        naming the transform.

    Returns:
      The restored tree (jax arrays).

    Raises:
      CheckpointError: (a `ValueError`) if the file's key paths, shapes, dtypes or state
        classes differ from `target`'s (the message names the first differences), if it was
        written by another transform than `transform` or names its transform and `transform`
        is None, if it is not a regular file, or if it is corrupt, truncated, malformed or
        not a gradtx checkpoint.
      TypeError: if `path` is not a file path, `transform` not a transform or
        `allow_other_transform` not a bool.
      FileNotFoundError: if there is no file at `path`.

    Example:
        >>> import tempfile, os, jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.momentum(0.1, 0.9)
        >>> path = os.path.join(tempfile.mkdtemp(), "state.npz")
        >>> gradtx.checkpoint.save_npz(path, tx.init({"w": jnp.ones(2)}), transform=tx)
        >>> target = jax.eval_shape(tx.init, {"w": jnp.ones(2)})  # shapes alone will do
        >>> gradtx.get_slot(gradtx.checkpoint.load_npz(path, target, transform=tx), "momentum", "w")
        Array([0., 0.], dtype=float32)
    """
    _checks.check_bool("load_npz", "allow_other_transform", allow_other_transform)
    name = None if transform is None else _common.checked_transform_name("load_npz", transform)
    nodes = _common.nodes(target)
    parts = [_common.leaves_of(k, n, lambda p: jax.eval_shape(packing.unpack, p)) for k, n in nodes]
    wanted = {key: _spec(like) for part in parts for key, like in part}
    types = _common.state_types(target)
    expected = [{"key": k, "shape": list(s), "dtype": d.name} for k, (s, d) in wanted.items()]
    limit = 4096 + 2 * len(json.dumps({"leaves": expected, "types": types, "transform": name}))
    with _file.open_zip(path, list(wanted)) as zf:
        header = _file.read_header(path, zf, limit)
        listed = _file.listing(path, header)
        if not allow_other_transform:
            _check_transform(path, header, name)
        _check_types(path, header, types)
        missing, extra = sorted(set(wanted) - set(listed)), sorted(set(listed) - set(wanted))
        if missing or extra:
            raise CheckpointError(
                f"`load_npz`: {path} does not match the target: missing {missing[:8]}, "
                f"unexpected {[_file.clip(k) for k in extra[:8]]}."
            )
        for key, (shape, dtype) in wanted.items():
            saved, saved_dtype = listed[key][0], _dtype(path, key, listed[key][1])
            if saved != shape or saved_dtype != dtype:
                raise CheckpointError(
                    f"`load_npz`: {key} is {_show(saved_dtype, saved)} in {path}, but the target wants "
                    f"{_show(dtype, shape)}.{_sharded_hint(key, saved, shape, types)}"
                )
        members = set(zf.namelist()) - {HEADER, LEGACY_DTYPES}
        unlisted = sorted(members - {k + ".npy" for k in listed})
        if unlisted:
            raise CheckpointError(
                f"`load_npz`: {path} holds members its header does not list: "
                f"{[_file.clip(m) for m in unlisted[:8]]}."
            )
        stored = {key: _file.read_member(path, zf, key, *wanted[key]) for key in wanted}
    leaves: list[Any] = []
    for (_, node), part in zip(nodes, parts, strict=True):
        arrays = [jnp.asarray(stored[key]) for key, _ in part]
        if packing.is_packed(node):  # the leaves packed again, into the target's layout
            tree = jax.tree.unflatten(jax.tree.structure(jax.eval_shape(packing.unpack, node)), arrays)
            leaves.append(packing.pack(tree, layout=node.layout))
        else:
            leaves.append(arrays[0])
    return jax.tree.unflatten(jax.tree.structure(target, is_leaf=packing.is_packed), leaves)
