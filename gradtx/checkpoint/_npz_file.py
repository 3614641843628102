"""The layout of `save_npz`'s files, and their reading within bounds: what `load_npz` opens and refuses.

Every read is bounded by the target before it is made: only a regular file is opened (a
FIFO would block, `/dev/zero` never ends); the zip's central directory, which `zipfile`
reads whole, is measured from the end record first; the JSON header's size is checked
before it is parsed; a member's `.npy` header is read only up to a fixed size; and an
array is read only once its shape and dtype are those the target wants. A zip that holds
a member twice is refused (readers disagree on which copy they give). Messages name the
file and the entry at fault, never the file's bytes.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import struct
import zipfile
import zlib
from typing import IO, Any, Iterator

import numpy as np

from gradtx.checkpoint import _common
from gradtx.checkpoint._common import CheckpointError

FORMAT = "gradtx.checkpoint.npz"
VERSION = 2
HEADER = "__gradtx__.json"
LEGACY_DTYPES = "__gradtx_dtypes__.npy"
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, KeyError, TypeError)
_NPY_HEADER_MAX = 16384  # numpy's own limit (`max_header_size`, 10,000) is checked after the read
_END, _END64_LOCATOR, _END64 = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06"


def clip(text: str, limit: int = 80) -> str:
    """`text` cut to `limit` characters (a name read from a file, shown in a message)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown(value: Any) -> str:
    """A value read from a file as a message shows it: its repr, cut short."""
    return clip(repr(value))


def _reason(err: BaseException) -> str:
    """What failed, without the file's bytes: the error's class, and its text only for the zip's and the
    disk's errors (a `.npy` header that cannot be parsed would be quoted whole)."""
    if isinstance(err, (zipfile.BadZipFile, zlib.error, EOFError, OSError)):
        return f"{type(err).__name__}: {clip(str(err), 120)}"
    return type(err).__name__


def stored_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array of `dtype` is stored as: bfloat16 and the other ml_dtypes as their bits."""
    return np.dtype(f"u{dtype.itemsize}") if dtype.kind == "V" else dtype


def _central_directory_size(f: IO[bytes]) -> int:
    """The size of the zip's central directory as its end records give it (`zipfile` reads that many
    bytes at once); 0 if there is no end record (`zipfile` then says the file is not a zip)."""
    size = f.seek(0, os.SEEK_END)
    start = max(size - (22 + 0xFFFF), 0)  # the end record, followed by a comment of up to 64 KiB
    f.seek(start)
    tail = f.read(size - start)
    at = tail.rfind(_END)
    if at < 0 or len(tail) - at < 22:
        return 0
    (directory,) = struct.unpack_from("<I", tail, at + 12)
    end = start + at
    if end >= 76:  # a zip64 end record and its locator, just before: `zipfile` reads their size
        f.seek(end - 76)
        before = f.read(76)
        if before[56:60] == _END64_LOCATOR and before[:4] == _END64:
            directory = max(directory, struct.unpack_from("<Q", before, 40)[0])
    return int(directory)


@contextlib.contextmanager
def open_zip(path: Any, keys: list[str]) -> Iterator[zipfile.ZipFile]:
    """The zip archive at `path`, a regular file whose directory holds about as many members as `keys`."""
    with _common.open_regular("load_npz", path) as f:
        directory = _central_directory_size(f)
        limit = 65536 + sum(256 + 2 * len(k.encode("utf-8", "surrogatepass")) for k in keys)
        if directory > limit:
            raise CheckpointError(
                f"`load_npz`: {path} lists far more members than the target has leaves (a zip directory "
                f"of {directory} bytes; the target's would take at most {limit}): the checkpoint of "
                "another, larger tree."
            )
        f.seek(0)
        try:
            zf = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, EOFError, ValueError) as err:
            raise CheckpointError(
                f"`load_npz`: {path} is not a gradtx checkpoint: not a readable zip archive "
                f"({_reason(err)}); a truncated file, or another format."
            ) from err
        with zf:
            counts = collections.Counter(zf.namelist())
            twice = sorted(name for name, n in counts.items() if n > 1)
            if twice:
                others = f" (and {len(twice) - 1} more)" if len(twice) > 1 else ""
                raise CheckpointError(
                    f"`load_npz`: {path} holds the member {shown(twice[0])} {counts[twice[0]]} times"
                    f"{others}; a zip whose members repeat is refused (readers disagree on which copy "
                    "they give): the file was altered, or not written by `save_npz`."
                )
            yield zf


def npy_header(path: Any, zf: zipfile.ZipFile, member: str) -> tuple[tuple[int, ...], np.dtype]:
    """A member's shape and stored dtype, from its `.npy` header alone (at most 16 KiB read, no data)."""
    with zf.open(member) as f:
        version = np.lib.format.read_magic(f)
        width = 2 if version == (1, 0) else 4
        raw = f.read(width)
        if len(raw) < width:
            raise EOFError(f"the .npy header of {shown(member)} ends early")
        length = int.from_bytes(raw, "little")
        if length > _NPY_HEADER_MAX:
            raise CheckpointError(
                f"`load_npz`: the member {shown(member)} of {path} has a .npy header "
                f"of {length} bytes, more than any array's ({_NPY_HEADER_MAX}); the file was altered."
            )
        body = f.read(length)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(io.BytesIO(raw + body))
    return tuple(shape), dtype


def _malformed(path: Any, entry: str, what: str) -> CheckpointError:
    return CheckpointError(
        f"`load_npz`: the header of {path} is malformed: the entry `{entry}` {what}; the file was "
        "altered, or not written by `save_npz`."
    )


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _read_legacy(path: Any, zf: zipfile.ZipFile, names: set[str]) -> dict[str, Any]:
    """The header of the first format: names and shapes from the members' `.npy` headers, dtypes beside."""
    shape, dtype = npy_header(path, zf, LEGACY_DTYPES)
    if shape != () or dtype.kind != "U":
        raise _malformed(path, LEGACY_DTYPES, f"holds {dtype.name}{list(shape)}, not one string")
    with zf.open(LEGACY_DTYPES) as f:
        dtypes = json.loads(str(np.lib.format.read_array(f, allow_pickle=False)))
    if not isinstance(dtypes, dict):
        raise _malformed(path, LEGACY_DTYPES, f"holds {_kind(dtypes)}, not a map of key paths to dtypes")
    leaves = []
    for name in sorted(names - {LEGACY_DTYPES}):
        key = name.removesuffix(".npy")
        shape, stored = npy_header(path, zf, name)
        leaves.append({"key": key, "shape": list(shape), "dtype": dtypes.get(key, stored.name)})
    return {"format": FORMAT, "version": 1, "leaves": leaves}


def read_header(path: Any, zf: zipfile.ZipFile, limit: int) -> dict[str, Any]:
    """The file's header (the first format's made up from its members), its layout checked: `leaves` a
    list, `types` a map of key paths to class names, `transform` a string, if there."""
    names = set(zf.namelist())
    if HEADER not in names and LEGACY_DTYPES not in names:
        raise CheckpointError(
            f"`load_npz`: {path} is not a gradtx checkpoint: it has no {HEADER} header "
            "(a plain np.savez file, or another program's)."
        )
    member = HEADER if HEADER in names else LEGACY_DTYPES
    if zf.getinfo(member).file_size > (limit if member == HEADER else 4 * limit):  # legacy: UTF-32 text
        raise CheckpointError(
            f"`load_npz`: the header of {path} lists far more than the target holds "
            f"({zf.getinfo(member).file_size} bytes): the checkpoint of another, larger tree."
        )
    try:
        header = json.loads(zf.read(HEADER)) if member == HEADER else _read_legacy(path, zf, names)
    except CheckpointError:
        raise
    except (*_READ_ERRORS, RecursionError) as err:
        raise CheckpointError(
            f"`load_npz`: the header of {path} cannot be read ({_reason(err)}); "
            "the file is corrupt or truncated."
        ) from err
    if not (
        isinstance(header, dict) and header.get("format") == FORMAT and isinstance(header.get("leaves"), list)
    ):
        raise CheckpointError(f"`load_npz`: {path} has a {HEADER} that is not a gradtx header.")
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version > VERSION:
        raise CheckpointError(
            f"`load_npz`: {path} has format version {shown(version)}; this gradtx reads versions "
            f"up to {VERSION} (a newer gradtx wrote it?)."
        )
    types = header.get("types", {})
    if not isinstance(types, dict) or not all(isinstance(v, str) for v in types.values()):
        got = _kind(types) if not isinstance(types, dict) else "a value that is not a string"
        raise _malformed(path, "types", f"must map key paths to class names, got {got}")
    transform = header.get("transform")
    if transform is not None and not isinstance(transform, str):
        raise _malformed(path, "transform", f"must be a transform's name, got {_kind(transform)}")
    return header


def listing(path: Any, header: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], str]]:
    """`{key path: (shape, dtype name)}` of the header's `leaves`, each entry's layout checked."""
    listed: dict[str, tuple[tuple[int, ...], str]] = {}
    for i, leaf in enumerate(header["leaves"]):
        entry = f"leaves[{i}]"
        if not isinstance(leaf, dict):
            raise _malformed(path, entry, f"is {_kind(leaf)}, not an object with `key`, `shape` and `dtype`")
        key, shape, dtype = leaf.get("key"), leaf.get("shape"), leaf.get("dtype")
        if not isinstance(key, str):
            raise _malformed(path, f"{entry}.key", f"must be a key path, got {_kind(key)}")
        if not (
            isinstance(shape, list)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise _malformed(path, f"{entry}.shape", "must be a list of sizes (ints >= 0)")
        if not isinstance(dtype, str):
            raise _malformed(path, f"{entry}.dtype", f"must be a dtype's name, got {_kind(dtype)}")
        if key in listed:
            raise _malformed(path, entry, f"lists the leaf {shown(key)} a second time")
        listed[key] = (tuple(shape), dtype)
    return listed


def read_member(path: Any, zf: zipfile.ZipFile, key: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """The array `key`, once its `.npy` header says it is `shape` of `dtype` (as stored)."""
    member = key + ".npy"
    try:
        got_shape, got_dtype = npy_header(path, zf, member)
        if got_dtype.hasobject:
            raise CheckpointError(f"`load_npz`: {key} in {path} holds Python objects; refused.")
        if got_shape != shape or got_dtype != stored_dtype(dtype):
            raise CheckpointError(
                f"`load_npz`: the array {key} in {path} is {got_dtype.name}{list(got_shape)}, but the "
                f"header lists {dtype.name}{list(shape)}: the file was altered."
            )
        with zf.open(member) as f:
            value = np.lib.format.read_array(f, allow_pickle=False)
    except CheckpointError:
        raise
    except _READ_ERRORS as err:
        raise CheckpointError(
            f"`load_npz`: the array {key} in {path} cannot be read ({_reason(err)}); "
            "the file is corrupt or truncated."
        ) from err
    return value.view(dtype) if value.dtype != dtype else value
