"""A config file's text, read within the read's size budget: regular files only, UTF-8 text only.

`read_text` checks the file before it reads a byte of it: a FIFO, a device, a directory or a file of the
kernel's /proc or /sys is refused (RETURNN would block on a FIFO, or read a process's environment), and so
is a file that would take the read over `MAX_CONFIG_BYTES` (parsing 50 MB of Python takes seconds and
gigabytes). Its bytes must be UTF-8, as Python's `open` reads them for RETURNN: a byte-order mark, a NUL
byte or another encoding is refused naming the file and the offset. A message about an included file never
quotes its content (an `include /etc/passwd` cannot print the file).
"""

from __future__ import annotations

import codecs
import os
import stat

from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._safe_eval_limits import Budget, BudgetExceeded

MAX_CONFIG_BYTES = 2**20  # the size budget of a read: a config and its includes (each time included), 1 MiB
MAX_INCLUDE_DEPTH = 16  # the most `include`s nested in one another
_KERNEL_DIRS = ("/proc", "/sys")
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def read_text(filename: str, budget: Budget, *, where: str = "") -> str:
    """The text of the config file `filename`, its newlines as Python's `open` gives them.

    Args:
      filename: the file's path.
      budget: the read's budget; the file's bytes are charged to it.
      where: for an included file, where it is included ("included from line 2 of 'a.config'"): its
        content is then never quoted in a message.

    Returns:
      The decoded text.

    Raises:
      FileNotFoundError: when there is no such file.
      ReturnnConfigError: for a file that is not a regular file, or not UTF-8 text.
      BudgetExceeded: when the file would take the read over `MAX_CONFIG_BYTES`.
    """
    name = f"{filename!r}" + (f" ({where})" if where else "")
    if not os.path.exists(filename):
        raise FileNotFoundError(f"`read_config`: config file not found: {name}.")
    _check_regular(os.stat(filename), name)  # before opening it: opening a device can act on it
    fd = os.open(filename, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as f:
        info = os.fstat(f.fileno())
        _check_regular(info, name)  # the file opened is the file checked
        left = MAX_CONFIG_BYTES - budget.file_bytes
        if info.st_size > left:
            raise _over_size(name, info.st_size, budget)
        data = f.read(left + 1)  # a file growing since `fstat` is read no further than the budget
    if len(data) > left:
        raise _over_size(name, len(data), budget)
    budget.file_bytes += len(data)
    return _decode(data, name, quote=not where).replace("\r\n", "\n").replace("\r", "\n")


def _over_size(name: str, size: int, budget: Budget) -> BudgetExceeded:
    return BudgetExceeded(
        f"`read_config`: {name} is {size} bytes, over the size budget of a read: a config and the files it "
        f"includes may have {MAX_CONFIG_BYTES} bytes together ({MAX_CONFIG_BYTES // 2**20} MiB, "
        f"`MAX_CONFIG_BYTES`; {budget.file_bytes} read before it). RETURNN configs are a few kilobytes: pass "
        "a large config as a dict of its values."
    )


def _check_regular(info: os.stat_result, name: str) -> None:
    kind = next((kind for is_kind, kind in _KINDS if is_kind(info.st_mode)), None)
    if kind is not None or not stat.S_ISREG(info.st_mode):
        raise ReturnnConfigError(
            f"`read_config`: {name} is {kind or 'not a regular file'}, not a config file: a config and the "
            "files it includes must be regular files."
        )
    if _on_kernel_fs(info):
        raise ReturnnConfigError(
            f"`read_config`: {name} is a file of the kernel's /proc or /sys filesystem, not a config file: a "
            "config and the files it includes must be regular files on disk."
        )


def _on_kernel_fs(info: os.stat_result) -> bool:
    """Whether the file lies on the filesystem of /proc or /sys (it reports size 0, and what it holds is the
    process's or the kernel's: an environment, a memory map)."""
    for path in _KERNEL_DIRS:
        try:
            if os.stat(path).st_dev == info.st_dev:
                return True
        except OSError:
            pass
    return False


def _decode(data: bytes, name: str, *, quote: bool) -> str:
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), None)
    if encoding is not None:
        raise ReturnnConfigError(
            f"`read_config`: {name} is {encoding} text (it starts with a {encoding} byte-order mark); "
            "RETURNN opens a config with Python's default encoding, UTF-8, and fails on it: save it as UTF-8."
        )
    if data.startswith(codecs.BOM_UTF8):
        raise ReturnnConfigError(
            f"`read_config`: {name} starts with a UTF-8 byte-order mark, which RETURNN reads as a character "
            "of the first line (a Python config fails with a SyntaxError, a line-format config's first key "
            "gets the mark in front): save it as UTF-8 without the mark."
        )
    offset = data.find(b"\0")
    if offset >= 0:
        raise ReturnnConfigError(
            f"`read_config`: {name} has a NUL byte at offset {offset} (line {_line(data, offset)}): it is a "
            "binary file (or UTF-16 text without a byte-order mark), not a RETURNN config."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        byte = f"byte 0x{data[e.start]:02x}" if quote else "a byte"
        raise ReturnnConfigError(
            f"`read_config`: {name} is not UTF-8 text: {byte} at offset {e.start} (line "
            f"{_line(data, e.start)}) is not valid UTF-8 (Latin-1 or another encoding?); RETURNN opens a "
            "config with Python's default encoding, UTF-8, and fails on it too: save it as UTF-8."
        ) from None


def _line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1
