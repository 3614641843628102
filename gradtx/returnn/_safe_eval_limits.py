"""The evaluator's size caps (`MAX_ELEMENTS`, ...), its checks of values and calls, and its error."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

import numpy as np

from gradtx.returnn._common import ReturnnConfigError

MAX_ELEMENTS = 10**6  # the most elements a sequence, string or array built by the config may have
MAX_INT_BITS = 10**5  # the largest integer a config may build, in bits
MAX_ITERATIONS = 10**6  # the most comprehension iterations one expression may run
WIDE_FORMAT = re.compile(r"\*|\d{5,}")  # a `%` / format-spec width that could build a huge string


class RefusedExpression(ReturnnConfigError):
    """A construct the reader does not evaluate; `what` says which, `line` where."""

    def __init__(self, what: str, line: int | None):
        self.what, self.line = what, line
        where = f"line {line} of the config" if line else "the config"
        super().__init__(
            f"`read_config`: {where}: {what}. Config files are read, not executed: only literals, "
            "arithmetic, list operations, a few builtins and numpy/math constructors are evaluated; write "
            "the value itself, or pass the config as a dict of its values."
        )


def refusal(what: str, line: int | None) -> RefusedExpression:
    """The error for a construct the reader does not evaluate."""
    return RefusedExpression(what, line)


def _size(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.size)
    if isinstance(value, (list, tuple, str, bytes, dict, set, frozenset, range)):
        return len(value)
    return 1


def _deep_size(value: Any) -> int:
    """Elements and containers of `value`, nested ones counted in full (a list repeating one big list counts
    it each time), stopping once over `MAX_ELEMENTS`."""
    total, stack = 0, [value]
    while stack and total <= MAX_ELEMENTS:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
            total += 1
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
            total += 1
        else:
            total += _size(item)
    return total


def check_value(value: Any, line: int | None) -> Any:
    """`value`, or `RefusedExpression` when it is over `MAX_ELEMENTS` elements or `MAX_INT_BITS` bits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise refusal(f"an integer over {MAX_INT_BITS} bits", line)
    if _deep_size(value) > MAX_ELEMENTS:
        raise refusal(f"a value of over {MAX_ELEMENTS} elements", line)
    return value


def guard_binop(op: ast.operator, left: Any, right: Any, line: int | None) -> None:
    """Refuse a binary operation whose result would be over the caps, before it is computed."""
    ints = isinstance(left, int) and isinstance(right, int)
    if isinstance(op, ast.Pow) and ints and right > 0:
        if right * max(abs(left).bit_length(), 1) > MAX_INT_BITS:
            raise refusal(f"`{left} ** {right}` is over {MAX_INT_BITS} bits", line)
    if isinstance(op, (ast.LShift, ast.RShift)) and ints and right > MAX_INT_BITS:
        raise refusal(f"a shift by {right} bits", line)
    if isinstance(op, ast.Mult):
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (list, tuple, str, bytes)) and isinstance(n, int):
                check_count(len(seq) * n, line)
    if isinstance(op, ast.Add) and isinstance(left, (list, tuple, str, bytes)) and hasattr(right, "__len__"):
        check_count(len(left) + len(right), line)
    if isinstance(op, ast.Mod) and isinstance(left, (str, bytes)) and WIDE_FORMAT.search(str(left)):
        raise refusal("a `%` format with a huge or `*` width", line)
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        check_count(int(np.prod(np.broadcast_shapes(np.shape(left), np.shape(right)))), line)


def guard_array_index(index: Any, line: int | None) -> None:
    """Refuse fancy indexing of an array (`None` or a sequence index), which can grow it."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(p is None or isinstance(p, (list, np.ndarray)) for p in parts):
        raise refusal("indexing an array with `None` or a sequence is not read", line)


def check_count(n: int, line: int | None) -> None:
    """Refuse a value of `n` elements when `n` is over `MAX_ELEMENTS`."""
    if n > MAX_ELEMENTS:
        raise refusal(f"a value of {n} elements (at most {MAX_ELEMENTS})", line)


def guard_call(func: Any, args: list[Any], kwargs: dict[str, Any], line: int | None) -> None:
    """Refuse a call that would build more than `MAX_ELEMENTS` elements, before it builds them."""
    if getattr(func, "__module__", None) == "numpy" or isinstance(func, np.ufunc):
        # numeric arrays only: a text array's rows are as wide as its longest string
        if _has_text(args) or _has_text([v for k, v in kwargs.items() if k != "dtype"]):
            raise refusal(f"`numpy.{func.__name__}` of text is not read", line)
        if "dtype" in kwargs and np.dtype(kwargs["dtype"]).itemsize > 16:
            raise refusal(f"the dtype {kwargs['dtype']!r} is not read", line)
    if func is range:
        check_count(len(range(*args)), line)
    elif func in (np.linspace, np.logspace, np.geomspace):
        check_count(int(kwargs.get("num", args[2] if len(args) > 2 else 50)), line)
    elif func is np.arange:
        check_count(math.ceil(_arange_len(args, kwargs)), line)
    elif func in (np.ones, np.zeros, np.full):
        shape = kwargs.get("shape", args[0] if args else 0)
        check_count(math.prod(int(n) for n in np.atleast_1d(shape).tolist()), line)
    elif func is np.repeat:
        reps = kwargs.get("repeats", args[1] if len(args) > 1 else 1)
        check_count(_deep_size(args[0] if args else kwargs.get("a")) * int(np.max(reps)), line)


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
