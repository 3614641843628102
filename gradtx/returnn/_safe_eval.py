"""A restricted evaluator for the expressions of a RETURNN config: values are computed, code is never run.

Admitted: literals and displays (list, tuple, dict, set, with `*`/`**` unpacking), f-strings of
admitted values, arithmetic and bit operations, comparisons, `and`/`or`/`not`, conditional
expressions, subscripts and slices, list/set/dict comprehensions and generator expressions over
admitted values (documented choice: they are common in configs, e.g. `[lr * i for i in range(5)]`,
and are bounded like everything else), names defined earlier in the config, the builtins in
`_BUILTINS`, a few read-only methods of plain values (`_METHODS`), `numpy.X` / `np.X` for the
constructors in `_safe_eval_modules.NUMPY` (with `.tolist()`), and `math.X`. Every value built is
capped (`MAX_ELEMENTS` elements, `MAX_VALUE_BYTES` bytes, integers of `MAX_INT_BITS` bits), work over
the caps is refused before it runs (big-integer products, keys sharing a hash, `sum` of lists), and
one read is bounded in time (`MAX_SECONDS`) and in the bytes of all values it builds (`MAX_BUILT_BYTES`),
so a config cannot exhaust time or memory (`_safe_eval_limits`). Anything else (other attributes or
calls, lambdas, walrus, dunder names) raises `ReturnnConfigError` naming the construct and the line.
numpy results become Python lists and floats.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._safe_eval_comprehensions import Comprehensions, dict_of, short_source
from gradtx.returnn._safe_eval_comprehensions import short_text as _short
from gradtx.returnn._safe_eval_limits import MAX_ELEMENTS as MAX_ELEMENTS
from gradtx.returnn._safe_eval_limits import MAX_INT_BITS as MAX_INT_BITS
from gradtx.returnn._safe_eval_limits import (
    WIDE_FORMAT,
    Budget,
    check_count,
    check_value,
    guard_array_index,
    guard_binop,
    guard_call,
    guard_hashed,
    own_bytes,
    refusal,
)
from gradtx.returnn._safe_eval_limits import RefusedExpression as RefusedExpression
from gradtx.returnn._safe_eval_modules import ModuleRef as ModuleRef
from gradtx.returnn._safe_eval_modules import module_attr, module_function, to_plain

_BUILTINS: dict[str, Callable[..., Any]] = {
    "list": list, "tuple": tuple, "dict": dict, "set": set, "frozenset": frozenset, "len": len,
    "sum": sum, "min": min, "max": max, "abs": abs, "round": round, "float": float, "int": int,
    "bool": bool, "str": str, "sorted": sorted, "range": range, "enumerate": enumerate, "zip": zip,
    "reversed": lambda seq: list(reversed(seq)), "any": any, "all": all,
}  # fmt: skip
_METHODS = {
    dict: frozenset({"get", "keys", "values", "items", "copy"}),
    list: frozenset({"copy", "index", "count"}),
    tuple: frozenset({"index", "count"}),
    str: frozenset({"split", "strip", "lower", "upper", "startswith", "endswith"}),
    np.ndarray: frozenset({"tolist"}),
}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}  # fmt: skip
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_, ast.Invert: operator.invert
}  # fmt: skip
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class EpochValue:
    """A `WrapEpochValue(...)` of RETURNN's pretraining, kept unevaluated: a network value that
    changes with the pretraining epoch (a layer's size, dropout), which the update never reads."""

    source: str
    line: int | None

    def __repr__(self) -> str:
        return f"<WrapEpochValue (line {self.line}): set per pretraining epoch>"


_EPOCH_VALUE = {
    f"{m}.WrapEpochValue" for m in ("Pretrain", "pretrain", "returnn.pretrain", "returnn.Pretrain")
}


def safe_eval(node_or_source: ast.AST | str, names: Mapping[str, Any], budget: Budget | None = None) -> Any:
    """Evaluate a config expression without running code.

    Args:
      node_or_source: an expression's AST node (as `ast.parse` gives it, its `lineno` counting
        config lines) or its source text.
      names: the config's names defined so far; a `ModuleRef` stands for an import, any object
        with `reason` and `line` attributes (the reader's `Unevaluated`) for a name that could not
        be read.
      budget: the read's budget (time, bytes built) this evaluation spends from; a fresh one when None.

    Returns:
      The value, with numpy arrays as Python lists and numpy scalars as Python numbers.

    Raises:
      ReturnnConfigError: naming the construct and its line when the expression is not admitted
        (`RefusedExpression`), or the budget when the read is over it (`BudgetExceeded`).

    Example:
        >>> safe_eval("[1e-3] * 2 + list(np.linspace(0.0, 1.0, num=3))", {"np": ModuleRef("numpy")})
        [0.001, 0.001, 0.0, 0.5, 1.0]
    """
    node: ast.AST
    if isinstance(node_or_source, str):
        try:
            node = ast.parse(node_or_source.strip(), mode="eval")
        except SyntaxError as e:
            raise refusal(
                f"`{_short(node_or_source)}` is not a Python expression ({e.msg})", e.lineno
            ) from None
        except (RecursionError, MemoryError):
            raise refusal("an expression nested too deeply", None) from None
    else:
        node = node_or_source
    if isinstance(node, ast.Expression):
        node = node.body
    budget = Budget() if budget is None else budget
    line = getattr(node, "lineno", None)
    budget.step(line)
    value = _Evaluator(names, budget).eval(node)
    if isinstance(node, ast.Name) and not isinstance(value, (np.ndarray, np.generic)):
        return value  # a config name's value, stored plain (not walked again: `d[k] = v` reads `d`)
    if _reads(node):  # not measured by `eval`: an element, a branch's value
        check_value(value, line)
    try:
        plain = to_plain(value)
    except RecursionError:
        raise refusal("a value nested too deeply", line) from None
    if plain is not value:  # numpy values became Python lists and numbers
        budget.charge(check_value(plain, line), line)
    return plain


# Nodes whose value was built before (a name's, an element's) or is a bool: not measured or charged again.
_READS = (ast.Name, ast.Constant, ast.Attribute, ast.BoolOp, ast.IfExp, ast.Compare, ast.Slice)


def _reads(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):  # an element; a slice is a new value
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return not any(isinstance(p, ast.Slice) for p in parts)
    return isinstance(node, _READS)


class _Evaluator(Comprehensions):
    def __init__(self, names: Mapping[str, Any], budget: Budget):
        self.scopes: list[Mapping[str, Any]] = [names]
        self.budget = budget
        self.iterations = 0  # of all comprehensions of the expression, at most MAX_ITERATIONS

    def eval(self, node: ast.AST) -> Any:
        """The value of `node`; a new value is checked against the caps and charged to the budget (a call's
        result in full, as it may hold new elements: `.tolist()`, `zip`; else the bytes it holds itself)."""
        method = getattr(self, "_" + type(node).__name__, None)
        line = getattr(node, "lineno", None)
        if method is None:
            raise refusal(f"{_describe(node)} is not read", line)
        self.budget.step(line)
        try:
            value = method(node)
            if not _reads(node):
                nbytes = check_value(value, line)
                self.budget.charge(nbytes if isinstance(node, ast.Call) else own_bytes(value), line)
            return value
        except ReturnnConfigError:
            raise
        except (ArithmeticError, TypeError, ValueError, LookupError, AttributeError, RecursionError) as e:
            raise refusal(
                f"evaluating `{short_source(node)}` failed: {type(e).__name__}: {str(e)[:200]}", line
            ) from None

    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _Name(self, node: ast.Name) -> Any:
        if node.id.startswith("__"):
            raise refusal(f"the dunder name `{node.id}` is not read", node.lineno)
        for scope in reversed(self.scopes):
            if node.id in scope:
                value = scope[node.id]
                if hasattr(value, "reason") and hasattr(value, "line"):
                    raise RefusedExpression(
                        f"`{node.id}` could not be read (line {value.line}: {_short(value.reason)})",
                        node.lineno,
                        unread=node.id,
                    )
                return value
        if node.id in _BUILTINS:
            return _BUILTINS[node.id]
        if hasattr(builtins, node.id):
            raise refusal(f"the builtin `{node.id}` is not read", node.lineno)
        raise refusal(f"the name `{node.id}` is not defined earlier in the config", node.lineno)

    def _seq(self, elts: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for elt in elts:
            if isinstance(elt, ast.Starred):
                out.extend(self.eval(elt.value))
            else:
                out.append(self.eval(elt))
            check_count(len(out), elt.lineno)
        return out

    def _List(self, node: ast.List) -> list[Any]:
        return self._seq(node.elts)

    def _Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self._seq(node.elts))

    def _Set(self, node: ast.Set) -> set[Any]:
        items = self._seq(node.elts)
        guard_hashed(items, node.lineno)
        return set(items)

    def _Dict(self, node: ast.Dict) -> dict[Any, Any]:
        pairs: list[tuple[Any, Any]] = []
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                mapping = self.eval(value)
                if not hasattr(mapping, "keys"):
                    raise TypeError(f"'{type(mapping).__name__}' object is not a mapping")
                pairs.extend((k, mapping[k]) for k in mapping.keys())
            else:
                pairs.append((self.eval(key), self.eval(value)))
            check_count(len(pairs), node.lineno)
        return dict_of(pairs, node.lineno)

    def _JoinedStr(self, node: ast.JoinedStr) -> str:
        return "".join(str(self.eval(v)) for v in node.values)

    def _FormattedValue(self, node: ast.FormattedValue) -> str:
        value = self.eval(node.value)
        check_value(value, node.lineno)  # printed whole
        convert: dict[int, Callable[[Any], str]] = {115: str, 114: repr, 97: ascii}
        if node.conversion in convert:
            value = convert[node.conversion](value)
        spec = self.eval(node.format_spec) if node.format_spec is not None else ""
        if WIDE_FORMAT.search(spec):
            raise refusal(f"the format spec {spec!r} is too wide", node.lineno)
        return format(value, spec)

    def _BinOp(self, node: ast.BinOp) -> Any:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise refusal(f"the operator `{type(node.op).__name__}` is not read", node.lineno)
        left, right = self.eval(node.left), self.eval(node.right)
        guard_binop(node.op, left, right, node.lineno)
        return op(left, right)

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.eval(node.operand))

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        value = None
        for sub in node.values:
            value = self.eval(sub)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _Compare(self, node: ast.Compare) -> bool:
        left = self.eval(node.left)
        check_value(left, node.lineno)  # compared whole
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comp)
            check_value(right, node.lineno)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    def _Subscript(self, node: ast.Subscript) -> Any:
        value = self.eval(node.value)
        if isinstance(value, ModuleRef):
            raise refusal(f"subscripting `{short_source(node.value)}` is not read", node.lineno)
        index = self.eval(node.slice)
        if isinstance(value, np.ndarray):
            guard_array_index(index, node.lineno)
        return value[index]

    def _Slice(self, node: ast.Slice) -> slice:
        return slice(*(None if p is None else self.eval(p) for p in (node.lower, node.upper, node.step)))

    def _Attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            raise refusal(f"the private attribute `.{node.attr}` is not read", node.lineno)
        base = self.eval(node.value)
        if isinstance(base, ModuleRef):
            return module_attr(base, node.attr, node.lineno)
        if hasattr(base, "safe_attribute"):  # the reader's `config` object
            return base.safe_attribute(node.attr, node.lineno)
        allowed = next((names for typ, names in _METHODS.items() if isinstance(base, typ)), frozenset())
        if node.attr not in allowed:
            raise refusal(f"the attribute `{short_source(node)}` is not read", node.lineno)
        return getattr(base, node.attr)

    def _Call(self, node: ast.Call) -> Any:
        if self._wraps_epoch_value(node.func):
            return EpochValue(_short(ast.unparse(node)), node.lineno)
        func = self.eval(node.func)
        if isinstance(func, ModuleRef):
            func = module_function(func, node.lineno)
        elif not callable(func):
            raise refusal(f"`{short_source(node.func)}` is not a function the reader calls", node.lineno)
        args = self._seq(node.args)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        guard_call(func, args, kwargs, node.lineno)
        result = func(*args, **kwargs)
        if isinstance(result, (enumerate, zip)):
            result = list(result)
        return result

    def _wraps_epoch_value(self, func: ast.expr) -> bool:
        """`WrapEpochValue` imported from RETURNN's pretrain module (its argument is not evaluated)."""
        parts = ast.unparse(func).split(".")
        ref = next((scope[parts[0]] for scope in reversed(self.scopes) if parts[0] in scope), None)
        return isinstance(ref, ModuleRef) and ".".join([ref.path, *parts[1:]]) in _EPOCH_VALUE


def _describe(node: ast.AST) -> str:
    names = {"Lambda": "a lambda", "NamedExpr": "the walrus operator `:=`", "Await": "`await`"}
    return names.get(type(node).__name__, f"the construct `{type(node).__name__}`")
