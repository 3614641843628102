"""The API reference's tables: the summary table that opens each page (name, first sentence) and the
optax_compat page's table (optax name, the gradtx objects it is built from, what differs)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from collections.abc import Mapping
from typing import Any

from api_items import Item, Page, _data_doc, _identity_key, _kind, _module, public_names  # noqa: F401

# --------------------------------------------------------------------------- summary tables

_ROLES = {"class": "py:class", "function": "py:func"}
_MISSING_ATTR = object()


def _rst_ref(path: str, kind: str, shown: str | None = None) -> str:
    """A reStructuredText link to the entry of `path`, shown without the leading `gradtx.`."""
    return f":{_ROLES.get(kind, 'py:obj')}:`{shown or path.removeprefix('gradtx.')} <{path}>`"


def _own_doc(item: Item) -> str:
    """The docstring `item`'s entry shows (a class's own, not a base's or namedtuple's)."""
    obj = item.obj
    if item.kind == "data":
        return _data_doc(obj, item.path.rsplit(".", 1)[1])
    doc = inspect.cleandoc((obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__) or "")
    if inspect.isclass(obj) and doc == f"{obj.__name__}({', '.join(getattr(obj, '_fields', ()))})":
        return ""  # the one namedtuple writes by itself
    return doc


def _paragraph(doc: str) -> str:
    return " ".join(doc.split("\n\n", 1)[0].split())


_NOT_SENTENCE_ENDS = ("e.g", "i.e", "cf", "vs", "al", "etc")


def first_sentence(text: str) -> str:
    """The first sentence of `text`: up to the first full stop outside code and brackets that a capital
    letter, code or a role follows."""
    depth, code = 0, False
    for i, c in enumerate(text):
        if c == "`":
            code = not code
        elif code:
            continue
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
        elif c == "." and depth == 0:
            rest, word = text[i + 1 :], text[:i].rsplit(" ", 1)[-1].lower()
            if (
                rest[:1] == " "
                and rest[1:2]
                and (rest[1].isupper() or rest[1] in "`:")
                and (word not in _NOT_SENTENCE_ENDS)
            ):
                return text[: i + 1]
    return text


def _parameters(obj: Any) -> set[str]:
    """The argument names of a function, or a class's (a NamedTuple's fields)."""
    try:
        return set(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return set()


@dataclasses.dataclass
class _Context:
    where: dict[int, str]  # object id -> the path it is documented under
    ambiguous: set[str]  # top-level names that are also argument names (`momentum`, `scale`)


def _context(items: list[Item]) -> _Context:
    where = {id(i.obj): i.path for i in items if i.alias_of is None and _identity_key(i.obj) is not None}
    arguments: set[str] = set()
    for i in items:
        if i.kind in ("function", "class"):
            arguments |= _parameters(i.obj)
    documented = {i.path for i in items}
    return _Context(where, {n for n in arguments if f"gradtx.{n}" in documented})


_BACKTICKED = re.compile(r"(?<![`:\\\w])`(?P<text>[A-Za-z_]\w*)`(?![`_\w])")
"""A bare name in single backticks (not a role's text, not double backticks, not a link)."""


def _in_context(text: str, item: Item, context: _Context) -> str:
    """`text` (from `item`'s docstring) with its bare names read as the docstring reads them: an
    argument of `item` is code, unlinked (`scale` in a projection's summary is its radius, not
    `gradtx.scale`); a name of the module `item` is listed in links to that module's object."""
    arguments = _parameters(item.obj) if item.kind in ("function", "class") else set()
    module = _module(item.path.rsplit(".", 1)[0])

    def read(match: re.Match[str]) -> str:
        name = match["text"]
        if name in arguments:
            return f":py:obj:`!{name}`"
        if name in context.ambiguous:
            return match[0]
        obj = getattr(module, name, _MISSING_ATTR)
        path = context.where.get(id(obj)) if _identity_key(obj) is not None else None
        if path is not None and path != f"gradtx.{name}":
            return f":py:obj:`{name} <{path}>`"
        return match[0]

    return _BACKTICKED.sub(read, text)


def _list_table(header: list[str], rows: list[list[str]], widths: str, css: str) -> list[str]:
    out = ["```{eval-rst}", ".. list-table::", "   :header-rows: 1", f"   :widths: {widths}"]
    out += [f"   :class: {css}", ""]
    for row in [header, *rows]:
        for j, cell in enumerate(row):
            out.append(f"   {'*' if j == 0 else ' '} - {cell or '-'}")
    return [*out, "```", ""]


def _summary_table(members: list[Item], context: _Context) -> list[str]:
    """Each object of the page, linked, with the first sentence of its docstring."""
    rows = []
    for i in members:
        summary = _in_context(first_sentence(_paragraph(_own_doc(i))), i, context)
        rows.append([_rst_ref(i.path, i.kind), summary])
    return _list_table(["name", "what it is"], rows, "30 70", "gradtx-summary")


# --------------------------------------------------------------------------- optax_compat's table


def _mirrored(obj: Any) -> tuple[Any, Mapping[str, Any]] | None:
    """The recipe a function of `gradtx.optax_compat._mirror.function` calls, and (for a `block`) the
    block's factory, state, renames and argument names; None for other objects."""
    fn = getattr(obj, "__wrapped__", obj)
    if not inspect.isfunction(fn) or fn.__closure__ is None:
        return None
    recipe = inspect.getclosurevars(fn).nonlocals.get("recipe")
    if not inspect.isfunction(recipe):
        return None
    return recipe, (inspect.getclosurevars(recipe).nonlocals if recipe.__closure__ else {})


class _Names(ast.NodeVisitor):
    """The names and dotted paths a function's body reads, in the order written."""

    def __init__(self) -> None:
        self.found: list[tuple[int, int, list[str]]] = []

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain: list[str] = []
        base: ast.expr = node
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if isinstance(base, ast.Name):
            self.found.append((node.lineno, node.col_offset, [base.id, *chain]))
        else:
            self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.found.append((node.lineno, node.col_offset, [node.id]))


_COMPAT = "gradtx.optax_compat."
_GLUE = ("gradtx.chain", "gradtx.identity")
"""Objects every recipe composes with, left out of the "gradtx object" column when others are there."""


def _built_from(obj: Any, where: dict[int, str], seen: set[int] | None = None) -> list[str]:
    """The documented gradtx objects (outside optax_compat) an optax_compat function is made of: a
    block's factory, else the objects its recipe's code reads, through the table's other entries and
    its private helpers."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    mirrored = _mirrored(obj)
    if mirrored is not None and "factory" in mirrored[1]:
        return _paths_of(mirrored[1]["factory"], where, seen)
    code = mirrored[0] if mirrored is not None else getattr(obj, "__wrapped__", obj)
    if not inspect.isfunction(code):
        return []
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
    except (OSError, TypeError, SyntaxError):
        return []
    definition = tree.body[0]
    if isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        definition.decorator_list = []  # the recipe's docstring sources, not what it calls
    names = _Names()
    names.visit(definition)
    found: list[str] = []
    for _, _, chain in sorted(names.found):
        value = code.__globals__.get(chain[0], _MISSING_ATTR)
        for attr in chain[1:]:
            value = getattr(value, attr, _MISSING_ATTR)
        for path in _paths_of(value, where, seen):
            if path not in found:
                found.append(path)
    core = [p for p in found if p not in _GLUE]
    return core or found


def _paths_of(value: Any, where: dict[int, str], seen: set[int]) -> list[str]:
    if value is _MISSING_ATTR or _identity_key(value) is None:
        return []
    if getattr(value, "__module__", None) == "gradtx.optax_compat" and _mirrored(value) is not None:
        return _built_from(value, where, seen)  # another entry of the table
    if (
        inspect.isfunction(value)
        and value.__module__.startswith("gradtx.optax_compat")
        and value.__name__.startswith("_")
    ):
        return _built_from(value, where, seen)  # a private helper of the tables (`_lr`)
    if inspect.isclass(value):
        return []  # a state class restated, the protocol's classes: not what it is built from
    path = where.get(id(value))
    return [path] if path is not None and not path.startswith("gradtx.optax_compat") else []


_STATE_OF = re.compile(r"the state of gradtx's `(\w+)`")


def _fields(cls: Any) -> str:
    return f"`{cls.__name__}({', '.join(cls._fields)})`"


def _gradtx_state(cls: Any) -> Any:
    """The gradtx state class optax's state class `cls` renames (from its docstring), or None."""
    import gradtx

    match = _STATE_OF.search(cls.__doc__ or "")
    return getattr(gradtx, match[1], None) if match else None


def _optax_row(item: Item, items_by_path: dict[str, Item], context: _Context) -> list[str]:
    """optax's name, the gradtx object(s) it is, and how it is built or what differs."""
    optax_name = "optax." + item.path.removeprefix(_COMPAT)
    target = item.alias_of or item.path
    kind = item.kind
    name = _rst_ref(target, kind, optax_name)
    if item.alias_of is not None and not item.alias_of.startswith("gradtx.optax_compat"):
        return [name, _rst_ref(item.alias_of, kind), "none: the same object"]
    where = context.where
    home = items_by_path[target]
    doc = _paragraph(_own_doc(home))
    summary = re.sub(r"^(?:optax's `[\w.]+`|Equals `optax\.[\w.]+`): ", "", doc)
    mirrored = _mirrored(home.obj)
    named = _named_in(doc, where)  # what the docstring says it is: "`gradtx.conditionally_mask` in ..."
    built: list[str] = []
    differences = summary
    if mirrored is not None and "factory" in mirrored[1]:
        built = _built_from(home.obj, where)
        differences = _block_differences(mirrored[1], summary)
    elif home.kind == "function" and mirrored is not None:
        built = named or _built_from(home.obj, where)  # else the blocks its recipe calls
    elif home.kind == "class":
        source = _gradtx_state(home.obj) if hasattr(home.obj, "_fields") else None
        if source is not None and id(source) in where:
            built = [where[id(source)]]
            same = tuple(source._fields) == tuple(home.obj._fields)
            differences = f"fields {_fields(home.obj)}" + (
                ", as gradtx's" if same else f"; gradtx's: {_fields(source)}"
            )
    built = built or named
    objects = ", ".join(_rst_ref(p, items_by_path[p].kind) for p in built if p in items_by_path)
    differences = _in_context(differences, home, context)
    if item.alias_of is not None:  # another optax path of the same object
        differences = f"as {_rst_ref(item.alias_of, kind, 'optax.' + item.alias_of.removeprefix(_COMPAT))}"
    return [name, objects, differences]


def _named_in(doc: str, where: dict[int, str]) -> list[str]:
    """The documented gradtx objects (outside optax_compat) a docstring names as `gradtx.<path>`."""
    named: list[str] = []
    for path in re.findall(r"`(gradtx\.[\w.]+)", doc):
        home = where.get(id(_resolve(path)))
        if home is not None and not home.startswith("gradtx.optax_compat") and home not in named:
            named.append(home)
    return named


def _resolve(path: str) -> Any:
    """The object at a dotted path under `gradtx`, or a marker when there is none."""
    module, _, name = path.rpartition(".")
    try:
        parent: Any = _module(module)
    except ImportError:
        parent = _resolve(module) if "." in module else _MISSING_ATTR
    return getattr(parent, name, _MISSING_ATTR)


def _block_differences(block: Mapping[str, Any], summary: str) -> str:
    """What an optax building block changes of its gradtx rule: the state's class and fields, the
    arguments' names, and the table's note."""
    state, rename, args = block.get("state"), block.get("rename") or {}, block.get("args") or {}
    said = []
    if isinstance(state, type):
        source = _gradtx_state(state)
        said.append(f"state {_fields(state)}")
        if source is not None and tuple(source._fields) != tuple(getattr(state, "_fields", ())):
            said[-1] += f" (gradtx's {_fields(source)})"
    elif state is not None:
        said.append("state in optax's class for the arguments given")
    if rename:
        said.append("fields renamed: " + ", ".join(f"`{a}` -> `{b}`" for a, b in rename.items()))
    if args:
        said.append("arguments: " + ", ".join(f"optax's `{a}` is gradtx's `{b}`" for a, b in args.items()))
    note = summary.split("; ", 1)[1].rstrip(".") if "; " in summary else ""
    if note:
        said.append(note)
    return "; ".join(said) if said else "none: optax's signature over gradtx's rule and state"


def _optax_table(page: Page, items: list[Item], context: _Context) -> list[str]:
    """optax_compat's page: each optax name, the gradtx object it is built from, and what differs;
    the names that are gradtx's own objects (`chain`, `scale`), documented on other pages, included."""
    import gradtx

    by_path = {i.path: i for i in items}
    where = context.where
    rows = []
    for module in page.modules:
        mod = _module(module)
        for name in sorted(public_names(module), key=str.lower):
            obj = getattr(mod, name)
            path = f"{module}.{name}"
            item = by_path.get(path)
            if item is None and _kind(obj) != "module":  # gradtx's own object, documented elsewhere
                home = where.get(id(obj)) if _identity_key(obj) is not None else None
                if home is None and f"gradtx.{name}" in by_path and getattr(gradtx, name, None) is obj:
                    home = f"gradtx.{name}"  # a plain value (`OptState` is `Any`)
                if home is not None:
                    item = Item(path, obj, _kind(obj), page.slug, module, alias_of=home)
            if item is not None:
                rows.append(_optax_row(item, by_path, context))
    header = ["optax", "gradtx object", "how it is built, what differs"]
    return ["```{eval-rst}", ".. currentmodule:: gradtx.optax_compat", "```", ""] + _list_table(
        header, rows, "18 34 48", "gradtx-summary gradtx-optax"
    )
