"""What both checkpoint formats share: their error, trees read leaf by leaf by key path, atomic files,
the name of the transform that wrote a state.

A `Packed` node (`gradtx.packing`) is read as the leaves it holds, each under the key path
the unpacked tree gives it, so a checkpoint does not depend on whether a run packed its
parameters. A checkpoint is read from a regular file only (`open_regular`): never a FIFO, a device or
a file of /proc.
"""

from __future__ import annotations

import os
import secrets
import stat
from typing import IO, Any, Callable

import jax

from gradtx import packing
from gradtx._core import naming as _naming

ROOT = "<root>"
"""The name under which a tree that is a single array is stored."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be read into the target: corrupt, truncated, foreign, or of another tree.

    The message names the file and what is wrong with it: the leaf, the variable or the state
    type that differs, or the part of the file that cannot be read. A `ValueError`, so code
    that catches those keeps working.
    """


def transform_name(transform: Any) -> str:
    """The name a checkpoint records for the transform that made a state: its factories, nested.

    An optimizer is named by the factory called (`adam`, `nadam`, `optax_compat.adam`, also
    when made by `gradtx.get`), a combinator by its name and its members' names
    (`chain(scale_by_adam, scale_by_learning_rate)`, `inject_hyperparams(adam)`), a wrapper
    that keeps its member's state as it is (`parallel.cross_shard`) by its member's name, the
    `optimize_loss` trainer of a `TrainState` as `optimize_loss(adam)`. Hyperparameters are
    not part of it: `adam(0.1)` and `adam(0.2)` have the same name, `adam` and `nadam`
    (whose states have the same class) do not. A transform of another library is named by
    its package and the function that made its `update` (`optax.chain`). The name is kept
    on the transform's `update` function: the state is unchanged.

    Args:
      transform: a transform (gradtx's or optax's: anything with `init` and `update`), or an
        `optimize_loss` trainer.

    Returns:
      The name, e.g. `"adam"`.

    Raises:
      TypeError: if `transform` is neither a transform nor an `optimize_loss` trainer.

    Example:
        >>> import gradtx
        >>> gradtx.checkpoint.transform_name(gradtx.adam(0.1))
        'adam'
        >>> tx = gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.nadam(1e-3))
        >>> gradtx.checkpoint.transform_name(tx)
        'chain(clip_by_global_norm, nadam)'
    """
    return checked_transform_name("transform_name", transform)


def checked_transform_name(fn: str, transform: Any) -> str:
    """`transform_name(transform)`, or the `TypeError` of `fn` (the function given it) for a non-transform."""
    if _naming.is_transform(transform):
        return _naming.name_of(transform)
    name = _naming.given_name(getattr(transform, "step", None))  # an `optimize_loss` trainer
    if name is None or not callable(getattr(transform, "init", None)):
        raise TypeError(
            f"`{fn}`: `transform` must be the transform that made the state (with `init` and `update`) "
            f"or the `optimize_loss` trainer of a `TrainState`, got {transform!r} of type "
            f"{type(transform).__name__}."
        )
    return name


def nodes(tree: Any) -> list[tuple[str, Any]]:
    """`(key path, leaf or Packed)` of `tree`, a `Packed` taken whole."""
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=packing.is_packed)[0]
    return [(jax.tree_util.keystr(path), node) for path, node in flat]


def leaves_of(key: str, node: Any, unpack: Any) -> list[tuple[str, Any]]:
    """The `(key path, leaf)` entries of one node: a `Packed` gives its leaves, named as if unpacked."""
    if not packing.is_packed(node):
        return [(key or ROOT, node)]
    leaves = jax.tree_util.tree_flatten_with_path(unpack(node))[0]
    return [(key + jax.tree_util.keystr(sub), leaf) for sub, leaf in leaves]


def is_named_tuple(x: Any) -> bool:
    """True for an instance of a NamedTuple class (a state class)."""
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def state_types(tree: Any, prefix: str = "") -> dict[str, str]:
    """`{key path: class name}` of every NamedTuple in `tree` (the state classes, which key paths alone
    do not tell apart: `ScaleByAddSignState(count, m)` and `ScaleByPowerSignState(count, m)`)."""
    out: dict[str, str] = {}
    if is_named_tuple(tree):
        out[prefix or ROOT] = type(tree).__name__
        for field in tree._fields:
            out.update(state_types(getattr(tree, field), f"{prefix}.{field}"))
        return out
    is_node = lambda x: x is not tree and (is_named_tuple(x) or packing.is_packed(x))  # noqa: E731
    for path, node in jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_node)[0]:
        if is_named_tuple(node):
            out.update(state_types(node, prefix + jax.tree_util.keystr(path)))
    return out


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (a named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)
_PSEUDO_FILE_SYSTEMS = ("/proc", "/sys")  # files the kernel makes up as they are read: size 0, or any size


def _not_regular(fn: str, name: str, mode: int) -> CheckpointError:
    kind = next((what for test, what in _KINDS if test(mode)), f"not a regular file (mode {mode:o})")
    real = os.path.realpath(name)
    link = f" (a link to {real})" if real != os.path.abspath(name) else ""
    return CheckpointError(
        f"`{fn}`: {name}{link} is {kind}; a checkpoint is a regular file, and reading anything else "
        "may block forever or never end."
    )


def open_regular(fn: str, path: Any) -> IO[bytes]:
    """`path` opened for binary reading, refused with a `CheckpointError` of `fn` unless it is a regular file.

    The path is checked before it is opened (symlinks followed: `os.stat`), so a FIFO is never
    opened (which would block) nor a device read (`/dev/zero` never ends); what was opened is
    checked again (the path may have changed in between; a FIFO is opened without blocking).
    Files of `/proc` and `/sys`, which the kernel makes up as they are read (their size says
    nothing of what a read gives), are refused, as is a file of size 0 that reads bytes.

    Raises:
      TypeError: if `path` is not a file path (`str`, `bytes` or `os.PathLike`).
      FileNotFoundError: if there is no file at `path`.
      CheckpointError: if it is not a regular file on disk.
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(
            f"`{fn}`: `path` must be a file path (a str or an os.PathLike), got {type(path).__name__}."
        )
    name = os.fsdecode(path)
    mode = os.stat(name).st_mode
    if not stat.S_ISREG(mode):
        raise _not_regular(fn, name, mode)
    real = os.path.realpath(name)
    pseudo = [root for root in _PSEUDO_FILE_SYSTEMS if real == root or real.startswith(root + "/")]
    if pseudo:
        raise CheckpointError(
            f"`{fn}`: {name} is a file of {pseudo[0]}, which the kernel makes up as it is read; "
            "a checkpoint is a regular file on disk."
        )
    nonblocking = getattr(os, "O_NONBLOCK", 0)  # a FIFO put there since the check: opened, not waited on
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_BINARY", 0) | nonblocking)
    f = os.fdopen(fd, "rb")
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise _not_regular(fn, name, opened.st_mode)
        if nonblocking:
            os.set_blocking(fd, True)
        if opened.st_size == 0 and f.read(1):
            raise CheckpointError(
                f"`{fn}`: {name} has size 0 but reads as more (a file the kernel makes up as it is "
                "read); a checkpoint is a regular file on disk."
            )
        f.seek(0)
    except BaseException:
        f.close()
        raise
    return f


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows, where a directory cannot be opened (and need not be synced)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike, write: Callable[[Any], None]) -> None:
    """`write(file)` into a temporary file beside `path`, synced, then renamed over `path`."""
    target = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666)  # the umask applies, as to open()
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
