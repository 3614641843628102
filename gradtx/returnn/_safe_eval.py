"""A restricted evaluator for the expressions of a RETURNN config: values are computed, code is never run.

Admitted: literals and displays (list, tuple, dict, set, with `*`/`**` unpacking), f-strings of
admitted values, arithmetic and bit operations, comparisons, `and`/`or`/`not`, conditional
expressions, subscripts and slices, list/set/dict comprehensions and generator expressions over
admitted values (documented choice: they are common in configs, e.g. `[lr * i for i in range(5)]`,
and are bounded like everything else), names defined earlier in the config, the builtins in
`_BUILTINS`, a few read-only methods of plain values (`_METHODS`), `numpy.X` / `np.X` for the
constructors in `_NUMPY` (with `.tolist()`), and `math.X`. Every produced sequence is capped at
`MAX_ELEMENTS` elements and every integer at `MAX_INT_BITS` bits, so a config cannot exhaust memory.
Anything else (other attributes or calls, lambdas, walrus, dunder names) raises `ReturnnConfigError`
naming the construct and the line. numpy results become Python lists and floats.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._safe_eval_limits import MAX_ELEMENTS as MAX_ELEMENTS
from gradtx.returnn._safe_eval_limits import MAX_INT_BITS as MAX_INT_BITS
from gradtx.returnn._safe_eval_limits import (
    MAX_ITERATIONS,
    WIDE_FORMAT,
    check_count,
    check_value,
    guard_array_index,
    guard_binop,
    guard_call,
    refusal,
)
from gradtx.returnn._safe_eval_limits import RefusedExpression as RefusedExpression

_BUILTINS: dict[str, Callable[..., Any]] = {
    "list": list, "tuple": tuple, "dict": dict, "set": set, "frozenset": frozenset, "len": len,
    "sum": sum, "min": min, "max": max, "abs": abs, "round": round, "float": float, "int": int,
    "bool": bool, "str": str, "sorted": sorted, "range": range, "enumerate": enumerate, "zip": zip,
    "reversed": lambda seq: list(reversed(seq)), "any": any, "all": all,
}  # fmt: skip
_NUMPY = frozenset(
    "linspace logspace geomspace arange array asarray concatenate repeat ones zeros full "
    "pi e inf nan float32 float64 int32 int64".split()
)
_MATH = frozenset("sqrt exp log log2 log10 pow pi e inf nan tau floor ceil cos sin".split())
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
class ModuleRef:
    """An imported module (or `from` import) as the config names it; only numpy's and math's are usable."""

    path: str  # e.g. "numpy", "numpy.linspace", "os.path"


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


def safe_eval(node_or_source: ast.AST | str, names: Mapping[str, Any]) -> Any:
    """Evaluate a config expression without running code.

    Args:
      node_or_source: an expression's AST node (as `ast.parse` gives it, its `lineno` counting
        config lines) or its source text.
      names: the config's names defined so far; a `ModuleRef` stands for an import, any object
        with `reason` and `line` attributes (the reader's `Unevaluated`) for a name that could not
        be read.

    Returns:
      The value, with numpy arrays as Python lists and numpy scalars as Python numbers.

    Raises:
      ReturnnConfigError: naming the construct and its line when the expression is not admitted.

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
    value = _Evaluator(names).eval(node)
    try:
        return to_plain(value)
    except RecursionError:
        raise refusal("a value nested too deeply", getattr(node, "lineno", None)) from None


def to_plain(value: Any) -> Any:
    """`value` with numpy arrays as lists and numpy scalars as Python scalars, inside lists, tuples and dicts;
    a container with nothing to convert is returned itself (so `b = a` aliases as in Python)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        items = [to_plain(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(to_plain(k), to_plain(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value


class _Evaluator:
    def __init__(self, names: Mapping[str, Any]):
        self.scopes: list[Mapping[str, Any]] = [names]
        self.iterations = 0  # of all comprehensions of the expression, at most MAX_ITERATIONS

    def eval(self, node: ast.AST) -> Any:
        method = getattr(self, "_" + type(node).__name__, None)
        line = getattr(node, "lineno", None)
        if method is None:
            raise refusal(f"{_describe(node)} is not read", line)
        try:
            return check_value(method(node), line)
        except ReturnnConfigError:
            raise
        except (ArithmeticError, TypeError, ValueError, LookupError, AttributeError, RecursionError) as e:
            raise refusal(
                f"evaluating `{_source(node)}` failed: {type(e).__name__}: {str(e)[:200]}", line
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
                    raise refusal(
                        f"`{node.id}` could not be read (line {value.line}: {_short(value.reason)})",
                        node.lineno,
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
        return set(self._seq(node.elts))

    def _Dict(self, node: ast.Dict) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                out.update(self.eval(value))
            else:
                out[self.eval(key)] = self.eval(value)
        return out

    def _JoinedStr(self, node: ast.JoinedStr) -> str:
        return "".join(str(self.eval(v)) for v in node.values)

    def _FormattedValue(self, node: ast.FormattedValue) -> str:
        value = self.eval(node.value)
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
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comp)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    def _Subscript(self, node: ast.Subscript) -> Any:
        value = self.eval(node.value)
        if isinstance(value, ModuleRef):
            raise refusal(f"subscripting `{ast.unparse(node.value)}` is not read", node.lineno)
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
            return _module_attr(base, node.attr, node.lineno)
        if hasattr(base, "safe_attribute"):  # the reader's `config` object
            return base.safe_attribute(node.attr, node.lineno)
        allowed = next((names for typ, names in _METHODS.items() if isinstance(base, typ)), frozenset())
        if node.attr not in allowed:
            raise refusal(f"the attribute `{ast.unparse(node)}` is not read", node.lineno)
        return getattr(base, node.attr)

    def _Call(self, node: ast.Call) -> Any:
        if self._wraps_epoch_value(node.func):
            return EpochValue(_short(ast.unparse(node)), node.lineno)
        func = self.eval(node.func)
        if isinstance(func, ModuleRef):
            func = _module_function(func, node.lineno)
        elif not callable(func):
            raise refusal(f"`{ast.unparse(node.func)}` is not a function the reader calls", node.lineno)
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

    def _run_comprehension(self, generators: list[ast.comprehension], emit: Callable[[], None]) -> None:
        scope: dict[str, Any] = {}
        self.scopes.append(scope)
        try:
            self._loop(generators, scope, emit)
        finally:
            self.scopes.pop()

    def _loop(self, gens: list[ast.comprehension], scope: dict, emit: Callable[[], None]) -> None:
        gen = gens[0]
        if gen.is_async:
            raise refusal("an async comprehension is not read", gen.target.lineno)
        for item in self.eval(gen.iter):
            self.iterations += 1
            if self.iterations > MAX_ITERATIONS:
                raise refusal(f"comprehensions of over {MAX_ITERATIONS} iterations", gen.target.lineno)
            _bind(gen.target, item, scope)
            if all(self.eval(cond) for cond in gen.ifs):
                if len(gens) > 1:
                    self._loop(gens[1:], scope, emit)
                else:
                    emit()

    def _ListComp(self, node: ast.ListComp | ast.GeneratorExp) -> list[Any]:
        out: list[Any] = []

        def emit() -> None:
            out.append(self.eval(node.elt))
            check_count(len(out), node.lineno)

        self._run_comprehension(node.generators, emit)
        return out

    _GeneratorExp = _ListComp

    def _SetComp(self, node: ast.SetComp) -> set[Any]:
        return set(self._ListComp(node))  # type: ignore[arg-type]

    def _DictComp(self, node: ast.DictComp) -> dict[Any, Any]:
        out: dict[Any, Any] = {}

        def emit() -> None:
            out[self.eval(node.key)] = self.eval(node.value)

        self._run_comprehension(node.generators, emit)
        return out


def _bind(target: ast.expr, value: Any, scope: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and not any(
        isinstance(t, ast.Starred) for t in target.elts
    ):
        values = list(value)
        if len(values) != len(target.elts):
            raise refusal(f"unpacking {len(values)} values into {len(target.elts)} names", target.lineno)
        for t, v in zip(target.elts, values, strict=True):
            _bind(t, v, scope)
    else:
        raise refusal(f"the loop target `{ast.unparse(target)}` is not read", target.lineno)


def _source(node: ast.AST) -> str:
    """The expression's text, shortened for a message."""
    try:
        return _short(ast.unparse(node))
    except RecursionError:
        return "..."


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(node: ast.AST) -> str:
    names = {"Lambda": "a lambda", "NamedExpr": "the walrus operator `:=`", "Await": "`await`"}
    return names.get(type(node).__name__, f"the construct `{type(node).__name__}`")


def _module_attr(base: ModuleRef, attr: str, line: int | None) -> Any:
    allowed = {"numpy": _NUMPY, "math": _MATH}.get(base.path)
    if allowed is None or attr not in allowed:
        raise refusal(f"`{base.path}.{attr}` is not read (of the imports, only numpy's and math's are)", line)
    value = getattr(np if base.path == "numpy" else math, attr)
    return value if not callable(value) or isinstance(value, type) else ModuleRef(f"{base.path}.{attr}")


def _module_function(ref: ModuleRef, line: int | None) -> Callable[..., Any]:
    module, _, attr = ref.path.partition(".")
    value = _module_attr(ModuleRef(module), attr, line) if attr else None
    if not isinstance(value, ModuleRef):
        raise refusal(f"calling `{ref.path}` is not read", line)
    return getattr(np if module == "numpy" else math, attr)
