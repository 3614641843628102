"""Statements that set config names in a way the reader cannot follow: each one warns, and the names it sets
(where the statement spells them) are read as `Unevaluated`.

When RETURNN runs a Python config, `exec("learning_rate = 0.5")`, `globals()["learning_rate"] = 0.5`,
`globals().update(learning_rate=0.5)`, `config.set("learning_rate", 0.5)`,
`sys.modules[__name__].learning_rate = 0.5` and `from m import *` set config values. The reader does not
run them, so without a word the update would use the value read before (0.01 where RETURNN uses 0.5).
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from gradtx.returnn._common import ReturnnConfigWarning

NAMESPACES = frozenset({"globals", "vars", "locals"})  # their result is the config's namespace
_RUNS_CODE = frozenset({"exec", "execfile"})
_DICT_WRITES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"})
_CONFIG_WRITES = frozenset({"set", "update", "add_line", "load_file", "parse_cmd_args"})
_CONFIG_DICTS = frozenset({"typed_dict", "dict"})
_NOT_RUN = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)  # their bodies run when called


def dropped_writes(
    stmt: ast.stmt, names: Mapping[str, Any], filename: str, *, quote: bool = True
) -> list[tuple[str, str, int]]:
    """Warn for each write in `stmt` (outside function bodies) that sets config names the reader cannot see.

    Args:
      stmt: a statement of the config.
      names: the config's names so far (to tell the `config` object and a config's own `globals`).
      filename: the config file, for the warning.
      quote: whether the warning may quote the statement (not for an included file).

    Returns:
      `(name, reason, line)` for each name a write spells (`globals()["lr"] = ...`): the caller reads
      it as `Unevaluated`.
    """
    found: list[tuple[int, str, _Names]] = []
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, _NOT_RUN):
            continue
        written = _written(node, names)
        if written is not None:
            found.append((getattr(node, "lineno", 0), _describe(node, quote), written))
        stack.extend(ast.iter_child_nodes(node))
    unread = []
    for line, what, (spelled, others) in sorted(found, key=lambda f: f[0]):
        where = f"`read_config`: line {line} of {filename!r}: {what}"
        listed = ", ".join(f"`{n}`" for n in sorted(spelled))
        if spelled:
            also = " and can set any other config name" if others else ""
            message = (
                f"{where} sets {listed}{also} when RETURNN runs the config; the reader does not run it, so "
                f"{listed} is read as unevaluated (refused if the update reads it)"
            )
        else:
            message = (
                f"{where} can set any config name when RETURNN runs the config; the reader does not run it, "
                "so the values it sets are not taken (a name keeps the value read before it)"
            )
        warnings.warn(f"{message}: write plain assignments instead.", ReturnnConfigWarning, stacklevel=2)
        reason = f"set by {what} (line {line}), which the reader does not run"
        unread += [(name, reason, line) for name in sorted(spelled)]
    return unread


_Names = tuple[frozenset[str], bool]  # the names a write spells, and whether it may set others


def _written(node: ast.AST, names: Mapping[str, Any]) -> _Names | None:
    """The names `node` sets dynamically, or None when it is no such write."""
    if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
        return frozenset(), True
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return _literal_names([node.slice]) if _namespace(node.value, names) else None
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return (frozenset({node.attr}), False) if _module_self(node.value) else None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name) and func.id in _RUNS_CODE and func.id not in names:
        return _exec_names(node.args[0]) if node.args else (frozenset(), True)
    if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and func.id not in names:
        return _literal_names(node.args[1:2]) if len(node.args) > 1 and _module_self(node.args[0]) else None
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr in _DICT_WRITES and _namespace(func.value, names):
        return _call_names(func.attr, node)
    if func.attr in _CONFIG_WRITES and _is_config(func.value, names):
        return _call_names(func.attr, node) if func.attr in ("set", "update") else (frozenset(), True)
    return None


def _namespace(node: ast.expr, names: Mapping[str, Any]) -> bool:
    """`globals()`, `vars()`, `locals()`, `config.typed_dict`, `sys.modules[__name__].__dict__`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        return node.func.id in NAMESPACES and node.func.id not in names
    if isinstance(node, ast.Attribute) and node.attr in _CONFIG_DICTS:
        return _is_config(node.value, names)
    return isinstance(node, ast.Attribute) and node.attr == "__dict__" and _module_self(node.value)


def _is_config(node: ast.expr, names: Mapping[str, Any]) -> bool:
    """A name bound to RETURNN's `config` object (the reader's `ConfigRef`)."""
    return isinstance(node, ast.Name) and type(names.get(node.id)).__name__ == "ConfigRef"


def _module_self(node: ast.expr) -> bool:
    """`sys.modules[...]`: the config's own module, when RETURNN imports the config as one."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "modules"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "sys"
    )


def _call_names(method: str, call: ast.Call) -> _Names:
    """The names a dict-writing call spells: `update({"a": 1}, b=2)`, `setdefault("a", 1)`, `set("a", 1)`."""
    if method == "update":
        keys: list[ast.expr | None] = [k for arg in call.args if isinstance(arg, ast.Dict) for k in arg.keys]
        spelled, others = _literal_names(keys)
        others |= any(not isinstance(arg, ast.Dict) for arg in call.args)
        others |= any(k.arg is None for k in call.keywords)
        return spelled | {str(k.arg) for k in call.keywords if k.arg is not None}, others
    if method in ("popitem", "clear") or not call.args:
        return frozenset(), True
    return _literal_names(call.args[:1])


def _literal_names(nodes: Sequence[ast.expr | None]) -> _Names:
    """The names `nodes` spell as string literals, and whether one is not a literal."""
    literal = [isinstance(n, ast.Constant) and isinstance(n.value, str) for n in nodes]
    spelled = {n.value for n, is_literal in zip(nodes, literal, strict=True) if is_literal}  # type: ignore[union-attr]
    return frozenset(spelled), not all(literal)


def _exec_names(code: ast.expr) -> _Names:
    """The names `exec("...")` of a literal binds (any, when the code is not a literal or sets names
    dynamically itself)."""
    if not (isinstance(code, ast.Constant) and isinstance(code.value, str)):
        return frozenset(), True
    try:
        body = ast.parse(code.value).body
    except (SyntaxError, RecursionError, ValueError):
        return frozenset(), True
    bound: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # their names are their own
        if _written(node, {}) is not None:
            return frozenset(bound), True
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(bound), not bound


def _describe(node: ast.AST, quote: bool) -> str:
    """The statement quoted (shortened), or, for an included file, what kind of write it is."""
    if quote:
        text = ast.unparse(node)
        return f"`{text if len(text) <= 80 else text[:77] + '...'}`"
    if isinstance(node, ast.ImportFrom):
        return "a `*` import"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return f"a call of `{node.func.id}`"
    return "a write to the config's namespace"
