"""`save_npz` / `load_npz`: any gradtx tree as one `.npz` file, written atomically, read only when it fits.

The file is a zip archive (NumPy's `.npz`): first a small JSON header, `__gradtx__.json`,
listing every leaf (its key path, shape and dtype), the class of every NamedTuple in
the tree (the optimizer's state types) and, when the saver passed it, the name of the
transform that made the state (`transform_name`: `adam`, `nadam`, ...; two optimizers
can share a state class); then one `.npy` member per leaf, named by its key path.
`load_npz` reads the header, compares it with the target and refuses any difference before
it reads a single array; it then checks each member's own `.npy` header against the
listing before reading its data, so a file can never make it allocate more than the target
holds. bfloat16 and the other ml_dtypes are stored as their bits (unsigned integers of the
same width) and the header keeps their names.

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
import zlib
from typing import IO, Any

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import packing
from gradtx._core import checks as _checks
from gradtx.checkpoint import _common
from gradtx.checkpoint._common import CheckpointError

FORMAT = "gradtx.checkpoint.npz"
VERSION = 2
HEADER = "__gradtx__.json"
_LEGACY_DTYPES = "__gradtx_dtypes__.npy"
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, KeyError, TypeError)


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
    return value.view(f"u{value.dtype.itemsize}") if value.dtype.kind == "V" else value


def save_npz(path: str | os.PathLike, tree: Any, *, transform: Any = None) -> None:
    """Write every array of `tree` to `path` (an `.npz` file), keyed by its key path, atomically.

    The file also records each leaf's shape and dtype, the class of each state in the
    tree and, given `transform`, its name (`transform_name`), which `load_npz` checks. An
    existing file at `path` is replaced only once the new one is complete and on disk: a
    crash while saving leaves the old checkpoint intact.

    Args:
      path: the file to write (no suffix is added).
      tree: a pytree of arrays (optimizer state, `TrainState`, params; packed or not).
      transform: the transform whose state `tree` is (or holds), or the `optimize_loss`
        trainer of a `TrainState`: `load_npz` then refuses to load the file into another
        one's state. None records no name.

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


def _dtype(path: Any, key: str, name: Any) -> np.dtype:
    try:
        return np.dtype(jnp.dtype(name))
    except TypeError as err:
        raise CheckpointError(f"`load_npz`: {path} gives {key} the unknown dtype {name!r}.") from err


def _npy_header(zf: zipfile.ZipFile, member: str) -> tuple[tuple[int, ...], np.dtype]:
    """A member's shape and stored dtype, from its `.npy` header alone (no data read)."""
    with zf.open(member) as f:
        version = np.lib.format.read_magic(f)
        read = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(f)
    return tuple(shape), dtype


def _read_header(path: Any, zf: zipfile.ZipFile, limit: int) -> dict[str, Any]:
    names = set(zf.namelist())
    if HEADER not in names and _LEGACY_DTYPES not in names:
        raise CheckpointError(
            f"`load_npz`: {path} is not a gradtx checkpoint: it has no {HEADER} header "
            "(a plain np.savez file, or another program's)."
        )
    member = HEADER if HEADER in names else _LEGACY_DTYPES
    if zf.getinfo(member).file_size > (limit if member == HEADER else 4 * limit):  # legacy: UTF-32 text
        raise CheckpointError(
            f"`load_npz`: the header of {path} lists far more than the target holds "
            f"({zf.getinfo(member).file_size} bytes): the checkpoint of another, larger tree."
        )
    try:
        if member == HEADER:
            header = json.loads(zf.read(HEADER))
        else:  # the first format: names and shapes from the members' `.npy` headers, dtypes beside them
            with zf.open(_LEGACY_DTYPES) as f:
                dtypes = json.loads(str(np.lib.format.read_array(f, allow_pickle=False)))
            leaves = []
            for name in sorted(names - {_LEGACY_DTYPES}):
                key = name.removesuffix(".npy")
                shape, stored = _npy_header(zf, name)
                leaves.append({"key": key, "shape": list(shape), "dtype": dtypes.get(key, stored.name)})
            header = {"format": FORMAT, "version": 1, "leaves": leaves}
    except _READ_ERRORS as err:
        raise CheckpointError(
            f"`load_npz`: the header of {path} cannot be read ({type(err).__name__}: {err}); "
            "the file is corrupt or truncated."
        ) from err
    if not (
        isinstance(header, dict) and header.get("format") == FORMAT and isinstance(header.get("leaves"), list)
    ):
        raise CheckpointError(f"`load_npz`: {path} has a {HEADER} that is not a gradtx header.")
    if not isinstance(header.get("version"), int) or header["version"] > VERSION:
        raise CheckpointError(
            f"`load_npz`: {path} has format version {header.get('version')!r}; this gradtx reads versions "
            f"up to {VERSION} (a newer gradtx wrote it?)."
        )
    return header


def _check_transform(path: Any, header: dict[str, Any], name: str | None) -> None:
    """The transform that wrote the file must be `name` (if both are known)."""
    stored = header.get("transform")
    if stored is not None and not isinstance(stored, str):
        raise CheckpointError(f"`load_npz`: the header of {path} is malformed (transform {stored!r}).")
    if name is None or stored is None or stored == name:
        return
    raise CheckpointError(
        f"`load_npz`: {path} holds the state of `{stored}`, but `transform` is `{name}`: another "
        "optimizer, whose state may have the same layout but means something else to it. Pass the "
        f"transform that wrote it (`{stored}`), or `allow_other_transform=True` to load it anyway (to "
        "continue a run with another optimizer on purpose)."
    )


def _check_types(path: Any, header: dict[str, Any], target: Any) -> None:
    if "types" not in header:  # the first format did not record them
        return
    stored, wanted = header["types"], _common.state_types(target)
    for key in sorted(set(stored) | set(wanted)):
        if stored.get(key) != wanted.get(key):
            raise CheckpointError(
                f"`load_npz`: at {key} {path} holds a {stored.get(key, 'plain container')}, "
                f"but the target has a {wanted.get(key, 'plain container')} there: "
                "the state of another optimizer (or another tree)."
            )


def _read_member(path: Any, zf: zipfile.ZipFile, key: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    member = key + ".npy"
    stored_dtype = _stored(np.zeros((), dtype)).dtype
    try:
        got_shape, got_dtype = _npy_header(zf, member)
        if got_dtype.hasobject:
            raise CheckpointError(f"`load_npz`: {key} in {path} holds Python objects; refused.")
        if got_shape != shape or got_dtype != stored_dtype:
            raise CheckpointError(
                f"`load_npz`: the array {key} in {path} is {_show(got_dtype, got_shape)}, but the header "
                f"lists {_show(dtype, shape)}: the file was altered."
            )
        with zf.open(member) as f:
            value = np.lib.format.read_array(f, allow_pickle=False)
    except CheckpointError:
        raise
    except _READ_ERRORS as err:
        raise CheckpointError(
            f"`load_npz`: the array {key} in {path} cannot be read ({type(err).__name__}: {err}); "
            "the file is corrupt or truncated."
        ) from err
    return value.view(dtype) if value.dtype != dtype else value


def _open(path: Any) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, ValueError) as err:
        raise CheckpointError(
            f"`load_npz`: {path} is not a gradtx checkpoint: not a readable zip archive "
            f"({err}); a truncated file, or another format."
        ) from err


def load_npz(
    path: str | os.PathLike, target: Any, *, transform: Any = None, allow_other_transform: bool = False
) -> Any:
    """Read a tree written by `save_npz`, with the structure, shapes and dtypes of `target`.

    The file's listing of leaves and state classes is compared with `target` before any
    array is read: every key path, shape and dtype, and the class of every state (a
    `ScaleByAdamState` where the target has one), must agree. Given `transform`, the
    transform that wrote the file must be the same one (`transform_name`): `adam`'s state
    is refused by `nadam` or `lazy_adam`, although the states are alike, while `adam(0.1)`
    and `adam(0.2)` are the same transform (a resumed run may change hyperparameters). A
    file saved without a transform, or by an older gradtx, is not checked. Packed and
    unpacked trees read each other's files.

    Args:
      path: the file to read.
      target: a tree of the expected structure: arrays or `jax.ShapeDtypeStruct` objects.
      transform: the transform whose state `target` is (or holds), or the `optimize_loss`
        trainer of a `TrainState`; None skips the check.
      allow_other_transform: load a file written by another transform all the same (to
        continue a run with another optimizer on purpose).

    Returns:
      The restored tree (jax arrays).

    Raises:
      CheckpointError: (a `ValueError`) if the file's key paths, shapes, dtypes or state
        classes differ from `target`'s (the message names the first differences), if it was
        written by another transform than `transform`, or if the file is corrupt, truncated
        or not a gradtx checkpoint.
      TypeError: if `transform` is not a transform or `allow_other_transform` not a bool.
      FileNotFoundError: if there is no file at `path`.

    Example:
        >>> import tempfile, os, jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.momentum(0.1, 0.9)
        >>> path = os.path.join(tempfile.mkdtemp(), "state.npz")
        >>> gradtx.checkpoint.save_npz(path, tx.init({"w": jnp.ones(2)}))
        >>> target = jax.eval_shape(tx.init, {"w": jnp.ones(2)})  # shapes alone will do
        >>> gradtx.get_slot(gradtx.checkpoint.load_npz(path, target), "momentum", "w")
        Array([0., 0.], dtype=float32)
    """
    _checks.check_bool("load_npz", "allow_other_transform", allow_other_transform)
    name = None if transform is None else _common.checked_transform_name("load_npz", transform)
    nodes = _common.nodes(target)
    parts = [_common.leaves_of(k, n, lambda p: jax.eval_shape(packing.unpack, p)) for k, n in nodes]
    wanted = {key: _spec(like) for part in parts for key, like in part}
    expected = [{"key": k, "shape": list(s), "dtype": d.name} for k, (s, d) in wanted.items()]
    listing = {"leaves": expected, "types": _common.state_types(target), "transform": name}
    limit = 4096 + 2 * len(json.dumps(listing))
    with _open(path) as zf:
        header = _read_header(path, zf, limit)
        try:
            listed = {e["key"]: (tuple(int(d) for d in e["shape"]), e["dtype"]) for e in header["leaves"]}
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"`load_npz`: the header of {path} is malformed ({err!r}).") from err
        _check_transform(path, header, None if allow_other_transform else name)
        _check_types(path, header, target)
        missing, extra = sorted(set(wanted) - set(listed)), sorted(set(listed) - set(wanted))
        if missing or extra:
            raise CheckpointError(
                f"`load_npz`: {path} does not match the target: missing {missing[:8]}, "
                f"unexpected {extra[:8]}."
            )
        for key, (shape, dtype) in wanted.items():
            if listed[key][0] != shape or _dtype(path, key, listed[key][1]) != dtype:
                raise CheckpointError(
                    f"`load_npz`: {key} is {_show(_dtype(path, key, listed[key][1]), listed[key][0])} "
                    f"in {path}, but the target wants {_show(dtype, shape)}."
                )
        members = set(zf.namelist()) - {HEADER, _LEGACY_DTYPES}
        unlisted = sorted(members - {k + ".npy" for k in listed})
        if unlisted:
            raise CheckpointError(
                f"`load_npz`: {path} holds members its header does not list: {unlisted[:8]}."
            )
        stored = {key: _read_member(path, zf, key, *wanted[key]) for key in wanted}
    leaves: list[Any] = []
    for (_, node), part in zip(nodes, parts, strict=True):
        arrays = [jnp.asarray(stored[key]) for key, _ in part]
        if packing.is_packed(node):  # the leaves packed again, into the target's layout
            tree = jax.tree.unflatten(jax.tree.structure(jax.eval_shape(packing.unpack, node)), arrays)
            leaves.append(packing.pack(tree, layout=node.layout))
        else:
            leaves.append(arrays[0])
    return jax.tree.unflatten(jax.tree.structure(target, is_leaf=packing.is_packed), leaves)
