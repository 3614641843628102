"""The evaluator's caps and budgets, its checks of values and calls, and its errors.

Two kinds of bound. Caps on one value or one operation (`MAX_ELEMENTS`, `MAX_VALUE_BYTES`,
`MAX_INT_BITS`, `MAX_ITERATIONS`, `MAX_SHARED_HASH`) refuse an expression (`RefusedExpression`): the
names it binds are read as `Unevaluated` and the read goes on. Budgets of one whole read (`MAX_SECONDS`,
`MAX_BUILT_BYTES`, and the reader's file budgets) stop the read (`BudgetExceeded`), naming the budget:
a `Budget` counts them from the start of `read_config` (or of one `safe_eval` call outside it).
"""

from __future__ import annotations

import ast
import collections
import itertools
import math
import re
import sys
import time
from collections.abc import ItemsView, Iterable, KeysView, Mapping, Set, ValuesView
from typing import Any

import numpy as np

from gradtx.returnn._common import ReturnnConfigError

MAX_ELEMENTS = 10**6  # the most elements a sequence, string or array built by the config may have
MAX_VALUE_BYTES = 64 * 2**20  # the most bytes one value may hold, nested values counted each time
MAX_INT_BITS = 10**5  # the largest integer a config may build (or multiply into), in bits
MAX_ITERATIONS = 2 * 10**5  # the most comprehension iterations one expression may run
MAX_SHARED_HASH = 32  # the most distinct keys of one set or dict that may share a hash value
MAX_SECONDS = 2.0  # the time budget of one read: its files parsed and evaluated
MAX_BUILT_BYTES = 256 * 2**20  # the memory budget of one read: the bytes of all values it builds
WIDE_FORMAT = re.compile(r"\*|\d{5,}")  # a `%` / format-spec width that could build a huge string

_ADVICE = (
    "Config files are read, not executed: only literals, arithmetic, list operations, a few builtins and "
    "numpy/math constructors are evaluated; write the value itself, or pass the config as a dict of its "
    "values."
)


class RefusedExpression(ReturnnConfigError):
    """A construct the reader does not evaluate; `what` says which, `line` where, `unread` the name that
    could not be read when that is why."""

    def __init__(self, what: str, line: int | None, *, unread: str | None = None):
        self.what, self.line, self.unread = what, line, unread
        where = f"line {line} of the config" if line else "the config"
        super().__init__(f"`read_config`: {where}: {what}. {_ADVICE}")


class BudgetExceeded(ReturnnConfigError):
    """A read over one of its budgets (time, memory, file size): the whole read stops."""


def refusal(what: str, line: int | None) -> RefusedExpression:
    """The error for a construct the reader does not evaluate."""
    return RefusedExpression(what, line)


class Budget:
    """What one read has spent: time since its start, bytes of values built, bytes of files read.

    Attributes:
      where: the file being read, for the messages.
      file_bytes: the bytes of the files read so far (the reader checks them against its size budget).
    """

    def __init__(self) -> None:
        self.deadline = time.monotonic() + MAX_SECONDS
        self.built = 0
        self.file_bytes = 0
        self.where = "the config"

    def _place(self, line: int | None) -> str:
        return f"line {line} of {self.where}" if line else self.where

    def step(self, line: int | None) -> None:
        """Stop the read once it has taken over `MAX_SECONDS`."""
        if time.monotonic() > self.deadline:
            raise BudgetExceeded(
                f"`read_config`: {self._place(line)}: reading the config took over {MAX_SECONDS:g} s, the "
                f"time budget of a read (`MAX_SECONDS`). {_ADVICE}"
            )

    def charge(self, nbytes: int, line: int | None) -> None:
        """Count `nbytes` built; stop the read once over `MAX_BUILT_BYTES`."""
        self.built += nbytes
        if self.built > MAX_BUILT_BYTES:
            raise BudgetExceeded(
                f"`read_config`: {self._place(line)}: the values built while reading the config exceed "
                f"{MAX_BUILT_BYTES // 2**20} MiB, the memory budget of a read (`MAX_BUILT_BYTES`). {_ADVICE}"
            )


def own_bytes(value: Any) -> int:
    """The bytes `value` itself holds (a container's slots, not its elements; an array's data)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + 112
    return sys.getsizeof(value)


_SCALARS = frozenset({int, float, bool, complex, type(None)})


def measure(value: Any) -> tuple[int, int]:
    """Elements and bytes of `value`, nested values counted in full each time they occur (a list repeating
    one big list counts it each time), stopping once over `MAX_ELEMENTS` or `MAX_VALUE_BYTES`. A string
    counts its characters, an array its elements."""
    elements, nbytes = 0, 0
    pending: list[Any] = [[value]]  # sized collections of values still to count
    while pending and elements <= MAX_ELEMENTS and nbytes <= MAX_VALUE_BYTES:
        children = pending.pop()
        elements += len(children)
        nbytes += sum(map(sys.getsizeof, children))
        if set(map(type, children)) <= _SCALARS:  # numbers only: counted
            continue
        for child in children:
            if isinstance(child, dict):
                pending += [child.keys(), child.values()]
            elif isinstance(child, (list, tuple, set, frozenset, KeysView, ValuesView, ItemsView)):
                pending.append(child)
            elif isinstance(child, (str, bytes, range)):
                elements += len(child) - 1
            elif isinstance(child, np.ndarray):
                elements += int(child.size) - 1
                nbytes += own_bytes(child) - sys.getsizeof(child)
    return elements, nbytes


def check_value(value: Any, line: int | None) -> int:
    """The bytes of `value` (as `measure` counts them), or `RefusedExpression` when it is over
    `MAX_ELEMENTS` elements, `MAX_VALUE_BYTES` bytes or `MAX_INT_BITS` bits."""
    if type(value) is float or value is None or type(value) is bool:
        return 24
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise refusal(f"an integer over {MAX_INT_BITS} bits", line)
    if type(value) is int:
        return sys.getsizeof(value)
    elements, nbytes = measure(value)
    if elements > MAX_ELEMENTS:
        raise refusal(f"a value of over {MAX_ELEMENTS} elements", line)
    if nbytes > MAX_VALUE_BYTES:
        raise refusal(
            f"a value of over {MAX_VALUE_BYTES // 2**20} MiB (nested values counted each time)", line
        )
    return nbytes


def guard_hashed(keys: Iterable[Any], line: int | None) -> None:
    """Refuse to build a set or dict of `keys` (a re-iterable) when over `MAX_SHARED_HASH` distinct keys share
    a hash value: each such key costs a probe past all the others (`{i * (2**61 - 1) for i in ...}`)."""
    counts = collections.Counter(map(hash, keys))
    if not counts or max(counts.values()) <= MAX_SHARED_HASH:
        return
    groups: dict[int, list[Any]] = {h: [] for h, n in counts.items() if n > MAX_SHARED_HASH}
    for key in keys:
        group = groups.get(hash(key))
        if group is not None:
            group.append(key)
    for group in groups.values():
        distinct: set[Any] = set()
        for start in range(0, len(group), 256):  # in chunks: a chunk of colliding keys costs at most 256**2
            distinct.update(group[start : start + 256])
            if len(distinct) > MAX_SHARED_HASH:
                raise refusal(
                    f"a set or dict whose keys share hash values (over {MAX_SHARED_HASH} distinct keys with "
                    "one hash: building it takes time quadratic in their number)",
                    line,
                )


def check_count(n: int, line: int | None) -> None:
    """Refuse a value of `n` elements when `n` is over `MAX_ELEMENTS`."""
    if n > MAX_ELEMENTS:
        raise refusal(f"a value of {n} elements (at most {MAX_ELEMENTS})", line)


_NUMBERS = frozenset({int, float, bool})


def _hashed_operand(value: Any) -> bool:
    return isinstance(value, (Set, Mapping))


def guard_binop(op: ast.operator, left: Any, right: Any, line: int | None) -> None:
    """Refuse a binary operation whose result would be over the caps, or whose work would be, before it is
    computed."""
    if type(left) in _NUMBERS and type(right) in _NUMBERS:  # the common case, first
        if type(left) is not float and type(right) is not float:
            _guard_ints(op, left, right, line)
        return
    check_value(left, line)  # operands read by name are measured here (a value changed in place can be big)
    check_value(right, line)
    if isinstance(left, int) and isinstance(right, int):
        _guard_ints(op, left, right, line)
    if isinstance(op, ast.Mult):
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (list, tuple, str, bytes)) and isinstance(n, int):
                check_count(len(seq) * n, line)
    if isinstance(op, ast.Add) and isinstance(left, (list, tuple, str, bytes)) and hasattr(right, "__len__"):
        check_count(len(left) + len(right), line)
    if isinstance(op, ast.Mod) and isinstance(left, (str, bytes)) and WIDE_FORMAT.search(str(left)):
        raise refusal("a `%` format with a huge or `*` width", line)
    if isinstance(op, (ast.BitOr, ast.BitAnd, ast.BitXor, ast.Sub)) and (
        _hashed_operand(left) or _hashed_operand(right)
    ):
        guard_hashed(list(itertools.chain(left, right)), line)
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        check_count(int(np.prod(np.broadcast_shapes(np.shape(left), np.shape(right)))), line)


def _guard_ints(op: ast.operator, left: int, right: int, line: int | None) -> None:
    """Refuse an operation of integers whose result would be over `MAX_INT_BITS`, before it is computed (a
    product's work grows with its size)."""
    if isinstance(op, ast.Pow) and right > 0:
        if right * max(abs(left).bit_length(), 1) > MAX_INT_BITS:
            raise refusal(f"`{_int_text(left)} ** {_int_text(right)}` is over {MAX_INT_BITS} bits", line)
    if isinstance(op, ast.Mult) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
        raise refusal(
            f"a product of a {left.bit_length()}-bit and a {right.bit_length()}-bit integer is over "
            f"{MAX_INT_BITS} bits",
            line,
        )
    if isinstance(op, ast.LShift) and right > 0 and right + left.bit_length() > MAX_INT_BITS:
        raise refusal(f"a shift by {_int_text(right)} bits (the result over {MAX_INT_BITS} bits)", line)
    if isinstance(op, ast.RShift) and right > MAX_INT_BITS:
        raise refusal(f"a shift by {_int_text(right)} bits", line)


def _int_text(n: int) -> str:
    """`n` for a message: its digits when short, else its size (Python refuses to print huge integers)."""
    return str(n) if n.bit_length() <= 64 else f"<a {n.bit_length()}-bit integer>"


def guard_array_index(index: Any, line: int | None) -> None:
    """Refuse fancy indexing of an array (`None` or a sequence index), which can grow it."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(p is None or isinstance(p, (list, np.ndarray)) for p in parts):
        raise refusal("indexing an array with `None` or a sequence is not read", line)


_SHALLOW = (len, list, tuple, enumerate, zip, any, all, range, bool)  # read only the top of their arguments
_DICT_READS = frozenset({"get", "keys", "values", "items", "copy"})


def guard_call(func: Any, args: list[Any], kwargs: dict[str, Any], line: int | None) -> None:
    """Refuse a call whose arguments are over the caps (a value changed in place by the config's statements
    can be: `str(x)` of it would print all of it), that would build more than `MAX_ELEMENTS` elements, or
    take work quadratic in its arguments, before it runs."""
    owner = getattr(func, "__self__", None)
    if not (any(func is f for f in _SHALLOW) or (isinstance(owner, dict) and func.__name__ in _DICT_READS)):
        for value in (*args, *kwargs.values()):
            check_value(value, line)
    if isinstance(owner, (list, tuple)):  # `index`, `count`: compare each element
        check_value(owner, line)
    if getattr(func, "__module__", None) == "numpy" or isinstance(func, np.ufunc):
        # numeric arrays only: a text array's rows are as wide as its longest string
        if _has_text(args) or _has_text([v for k, v in kwargs.items() if k != "dtype"]):
            raise refusal(f"`numpy.{func.__name__}` of text is not read", line)
        if "dtype" in kwargs and np.dtype(kwargs["dtype"]).itemsize > 16:
            raise refusal(f"the dtype {kwargs['dtype']!r} is not read", line)
    if func is range:
        check_count(len(range(*args)), line)
    elif func is zip and args:  # `zip(x, x, ..., x)`: as many elements as its arguments together
        check_count(min(len(a) if hasattr(a, "__len__") else 0 for a in args) * len(args), line)
    elif func in (np.linspace, np.logspace, np.geomspace):
        check_count(int(kwargs.get("num", args[2] if len(args) > 2 else 50)), line)
    elif func is np.arange:
        check_count(math.ceil(_arange_len(args, kwargs)), line)
    elif func in (np.ones, np.zeros, np.full):
        shape = kwargs.get("shape", args[0] if args else 0)
        check_count(math.prod(int(n) for n in np.atleast_1d(shape).tolist()), line)
    elif func is np.repeat:
        reps = kwargs.get("repeats", args[1] if len(args) > 1 else 1)
        check_count(measure(args[0] if args else kwargs.get("a"))[0] * int(np.max(reps)), line)
    elif func in (set, frozenset) and args:
        guard_hashed(args[0], line)
    elif func is dict and args:
        pairs = args[0]
        guard_hashed(pairs.keys() if hasattr(pairs, "keys") else [next(iter(p), None) for p in pairs], line)
    elif func is sum:
        _guard_sum(args[0] if args else (), args[1] if len(args) > 1 else kwargs.get("start", 0), line)
    elif func is round and isinstance(args[0] if args else None, int):
        digits = args[1] if len(args) > 1 else kwargs.get("ndigits")
        if isinstance(digits, int) and abs(digits) > MAX_INT_BITS:
            raise refusal(f"`round` to {digits} digits (at most {MAX_INT_BITS})", line)


def _guard_sum(items: Any, start: Any, line: int | None) -> None:
    """Refuse `sum(lists, [])` when its copies (each partial sum copied again) would be over `MAX_ELEMENTS`
    times 100."""
    if isinstance(start, (list, tuple)) and hasattr(items, "__iter__"):
        total, copies = len(start), 0
        for item in items:
            total += len(item) if hasattr(item, "__len__") else 1
            copies += total
        if copies > 100 * MAX_ELEMENTS:
            raise refusal(f"a `sum` of sequences copying {copies} elements", line)


def _has_text(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, bytes)) or (isinstance(item, np.ndarray) and item.dtype.kind in "SUO"):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
    return False


def _arange_len(args: list[Any], kwargs: dict[str, Any]) -> float:
    values = list(args) + [kwargs[k] for k in ("start", "stop", "step") if k in kwargs]
    start, stop, step = (0.0, values[0], 1.0) if len(values) == 1 else (*values[:2], *(values[2:3] or [1.0]))
    return max(0.0, (float(stop) - float(start)) / float(step))
