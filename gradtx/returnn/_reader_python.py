"""The Python config walker: a config's top-level statements bound to their values, or to `Unevaluated`."""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._reader_dynamic import NAMESPACES, dropped_writes
from gradtx.returnn._safe_eval import ModuleRef, RefusedExpression, check_value, safe_eval, short_source
from gradtx.returnn._safe_eval_limits import Budget, BudgetExceeded, check_count, guard_hashed

_AUGMENTED = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
_AUGMENTED |= {ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


@dataclasses.dataclass(frozen=True)
class Unevaluated:
    """A config name whose value the reader could not compute without executing the config.

    Attributes:
      name: the config key.
      reason: why, e.g. "a function definition is not executed".
      line: the config line that bound it (None for the line format).
    """

    name: str
    reason: str
    line: int | None = None

    def __repr__(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"<Unevaluated {self.name!r}{where}: {self.reason}>"


FUNCTION_DEFINITION = "a function definition is not executed"
CLASS_DEFINITION = "a class definition is not executed"
_STATEMENTS = {
    "FunctionDef": FUNCTION_DEFINITION,
    "AsyncFunctionDef": FUNCTION_DEFINITION,
    "ClassDef": CLASS_DEFINITION,
    "For": "a `for` loop is not executed",
    "AsyncFor": "a `for` loop is not executed",
    "While": "a `while` loop is not executed",
    "With": "a `with` block is not executed",
    "AsyncWith": "a `with` block is not executed",
    "Try": "a `try` block is not executed",
    "Match": "a `match` statement is not executed",
}


class PythonReader:
    """Walks a Python config's top-level statements, binding into `names` (RETURNN's `typed_dict`);
    `budget` is the read's, `quote` whether messages may quote the file (not when it is included)."""

    def __init__(
        self, names: dict[str, Any], filename: str, budget: Budget | None = None, *, quote: bool = True
    ):
        self.names = names
        self.filename = filename
        self.budget = Budget() if budget is None else budget
        self.quote = quote
        names.setdefault("config", ConfigRef(names))  # RETURNN runs a Python config with `config` defined

    def run(self, content: str, first_line: int = 0) -> None:
        try:
            module = ast.parse(content, self.filename)
        except SyntaxError as e:
            why = f": {e.msg.rstrip('.')}" if self.quote else ""
            raise ReturnnConfigError(
                f"`read_config`: {self.filename!r} is read as a Python config (it starts with `#!` or is "
                f"named *.py, as RETURNN decides) but line {(e.lineno or 0) + first_line} is not valid "
                f"Python{why}."
            ) from None
        except RecursionError:
            raise ReturnnConfigError(
                f"`read_config`: {self.filename!r} is nested too deeply to parse."
            ) from None
        ast.increment_lineno(module, first_line)
        self.statements(module.body)

    def eval(self, node: ast.AST) -> Any:
        return safe_eval(node, self.names, self.budget)

    def statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.budget.step(stmt.lineno)
            read = True
            try:
                self.statement(stmt)
            except BudgetExceeded:
                raise
            except ReturnnConfigError as e:
                read = False
                reason = e.what if isinstance(e, RefusedExpression) else str(e)
                for name in sorted(_bound_names([stmt])):
                    if name in NAMESPACES and name not in self.names:
                        continue  # `globals()[...] = ...` changes no name `globals`
                    if getattr(e, "unread", None) == name and isinstance(self.names.get(name), Unevaluated):
                        continue  # `d[k] = 1` after `d` could not be read: `d` keeps its first reason
                    if not isinstance(self.names.get(name), (ModuleRef, ConfigRef)):
                        self.names[name] = Unevaluated(name, reason, stmt.lineno)
            if not (read and isinstance(stmt, ast.If)):  # an `if`'s branch taken is walked by `statements`
                for name, reason, line in dropped_writes(stmt, self.names, self.filename, quote=self.quote):
                    self.names[name] = Unevaluated(name, reason, line)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value)
            for target in stmt.targets:
                self.assign(target, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            op = _AUGMENTED.get(type(stmt.op))
            if op is None or not isinstance(stmt.target, (ast.Name, ast.Subscript)):
                raise _unread(f"the augmented assignment `{short_source(stmt)}` is not read", stmt)
            text = f"({ast.unparse(stmt.target)}) {op} ({ast.unparse(stmt.value)})"
            expr = ast.parse(text, mode="eval").body
            ast.increment_lineno(expr, stmt.lineno - 1)
            self.assign(stmt.target, self.eval(expr))
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self.names[alias.asname] = ModuleRef(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    self.names[top] = ModuleRef(top)
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                ref = ModuleRef(f"{stmt.module or ''}.{alias.name}")
                if stmt.module in ("numpy", "math") and alias.name != "*":  # `from math import pi`: the value
                    try:
                        ref = safe_eval(f"m.{alias.name}", {"m": ModuleRef(stmt.module)}, self.budget)
                    except RefusedExpression:
                        pass  # stays an import, refused where used
                if alias.name != "*":
                    self.names[alias.asname or alias.name] = ref
        elif isinstance(stmt, ast.If):
            taken = stmt.body if self.eval(stmt.test) else stmt.orelse
            self.statements(taken)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.names.pop(target.id, None)
                elif isinstance(target, ast.Subscript):
                    del self.container(target.value)[self.eval(target.slice)]
                else:
                    raise _unread(f"`{short_source(stmt)}` is not read", stmt)
        elif isinstance(stmt, ast.Expr) and _is_mutation(stmt.value):
            call = stmt.value
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            container = self.container(call.func.value)
            if call.func.attr not in _MUTATIONS[type(container)]:
                raise _unread(f"`{ast.unparse(call.func)}` on a {type(container).__name__} is not read", call)
            args = [self.eval(a) for a in call.args]
            _refuse_cycle(container, [args, [self.eval(k.value) for k in call.keywords]], call)
            getattr(container, call.func.attr)(
                *args, **{str(k.arg): self.eval(k.value) for k in call.keywords}
            )
            _check_container(container, stmt.lineno)
        elif isinstance(stmt, (ast.Expr, ast.Pass, ast.Global, ast.Nonlocal, ast.Assert, ast.AnnAssign)):
            changed = {
                n for n in _bound_names([stmt]) if not isinstance(self.names.get(n), (ModuleRef, ConfigRef))
            }
            if isinstance(stmt, ast.Expr) and changed:
                raise _unread(
                    f"the call `{short_source(stmt)}` is not executed (it may change the value)", stmt
                )
        else:
            raise _unread(
                _STATEMENTS.get(type(stmt).__name__, f"the statement `{type(stmt).__name__}` is not read"),
                stmt,
            )

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(
            isinstance(t, ast.Starred) for t in target.elts
        ):
            values = list(value)
            if len(values) != len(target.elts):
                raise _unread(f"unpacking {len(values)} values into {len(target.elts)} names fails", target)
            for t, v in zip(target.elts, values, strict=True):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            _refuse_cycle(self.container(target.value), value, target)
            self.container(target.value)[self.eval(target.slice)] = value
            _check_container(self.container(target.value), target.lineno)
        else:
            raise _unread(f"the assignment target `{short_source(target)}` is not read", target)

    def container(self, node: ast.expr) -> Any:
        """The dict or list `node` names (itself, so changing it changes the config's value)."""
        value = self.eval(node)
        if not isinstance(value, (dict, list)):
            raise _unread(f"changing `{short_source(node)}` (a {type(value).__name__}) is not read", node)
        return value


def _check_container(container: dict[Any, Any] | list[Any], line: int | None) -> None:
    """Refuse a dict or list a statement changed when it now has over `MAX_ELEMENTS` elements, or keys
    sharing a hash (`guard_hashed`). Its nested size is not measured again (that would take time quadratic
    in the statements building a network): an operation measures what it reads (`guard_call`), and
    `over_caps` what the read gives."""
    check_count(len(container), line)
    if isinstance(container, dict):
        guard_hashed(container.keys(), line)


def over_caps(names: dict[str, Any], budget: Budget) -> None:
    """Read as `Unevaluated` each value of `names` over the caps: one a statement changed in place (a list
    repeated a thousand times in another, then appended to)."""
    verdicts: dict[int, str | None] = {}  # by value: why it is over the caps (a value bound to many names)
    for name, value in list(names.items()):
        if isinstance(value, (Unevaluated, ModuleRef, ConfigRef)):
            continue
        if id(value) not in verdicts:
            budget.step(None)
            try:
                check_value(value, None)
                verdicts[id(value)] = None
            except RefusedExpression as e:
                verdicts[id(value)] = f"{e.what}, once statements changed it in place"
        if verdicts[id(value)] is not None:
            names[name] = Unevaluated(name, str(verdicts[id(value)]), None)


def _refuse_cycle(container: Any, value: Any, node: ast.AST) -> None:
    """Refuse to put `container` inside itself (a config value must be a tree)."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if item is container:
            raise _unread(f"`{short_source(node)}` would put a value inside itself", node)
        if isinstance(item, (dict, list, tuple)) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)


_MUTATIONS: dict[type, frozenset[str]] = {
    dict: frozenset({"update", "setdefault"}),
    list: frozenset({"append", "extend", "insert"}),
}


def _is_mutation(node: ast.expr) -> bool:
    """Whether `node` is `x.update(...)`, `x[k].append(...)`, ...: a call changing a dict or list in place."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and any(node.func.attr in names for names in _MUTATIONS.values())
        and not any(isinstance(a, ast.Starred) for a in node.args)
        and all(k.arg is not None for k in node.keywords)
    )


class ConfigRef:
    """RETURNN's `config` object inside a Python config: its read methods (`config.value("task", "train")`,
    `config.int(...)`, ...) on the names defined so far, as RETURNN's `Config` reads typed values."""

    _READERS = frozenset(
        "value typed_value opt_typed_value int float bool bool_or_other has is_true is_typed list".split()
    )

    def __init__(self, names: dict[str, Any]):
        self.names = names

    def __repr__(self) -> str:
        return "<config>"

    def safe_attribute(self, attr: str, line: int | None) -> Any:
        if attr not in self._READERS:
            raise RefusedExpression(f"`config.{attr}` is not read", line)

        def read(key: str, default: Any = None, index: int | None = None, **kwargs: Any) -> Any:
            return self.read(attr, key, default, index, line)

        return read

    def read(self, method: str, key: str, default: Any, index: int | None, line: int | None) -> Any:
        if method in ("has", "is_typed"):
            return key in self.names
        if key not in self.names:  # RETURNN reads the default as it reads a value
            if method in ("is_true", "list") and default is None:
                return False if method == "is_true" else []
            return float(default) if method == "float" and isinstance(default, str) else default
        value = self.names[key]
        if isinstance(value, (Unevaluated, ModuleRef, ConfigRef)):
            raise RefusedExpression(
                f"`config.{method}({key!r})` reads `{key}`, which could not be read", line
            )
        if method == "is_true":
            return bool(value)
        if method == "list":
            return default if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
        if method == "value":
            if value is None:
                return default
            if isinstance(value, (list, tuple)) and index is None:
                return ",".join(str(v) for v in value)
            return str(value[index] if index is not None else value)
        if method in ("int", "float", "bool", "bool_or_other") and index is None:
            index = 0
        if index is not None and isinstance(value, (list, tuple)):
            value = value[index]
        if method == "float" and isinstance(value, str):
            return float(value)
        if method == "bool" and isinstance(value, int):
            return bool(value)
        return value


def _unread(what: str, node: ast.AST) -> RefusedExpression:
    return RefusedExpression(what, getattr(node, "lineno", None))


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """The top-level names the statements assign, define, import, or change through a subscript,
    attribute or method call (`network["x"] = ...`, `lrs.append(...)`); function bodies not entered."""
    names: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.update(_base_name(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            names.update(_base_name(node.func.value))
        stack.extend(ast.iter_child_nodes(node))
    return names


def _base_name(node: ast.expr) -> set[str]:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return {node.id} if isinstance(node, ast.Name) else set()
