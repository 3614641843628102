"""Inline code renders as code and links to its entry wherever the name is documented.

Loaded by docs/conf.py (`extensions`, and `default_role = "gradtx-code"`). Three parts:

- The default role `gradtx-code`. Single backticks in the docstrings (reStructuredText, read by
  autodoc and napoleon) render as code, not as Sphinx's default italics. A text that is a name (an
  identifier or a dotted path, `adam`, `gradtx.parallel.sharded_state`, optionally followed by `()`
  or `(...)`) becomes a `py:obj` cross-reference; any other text (`weight_decay * params`,
  `count -> float32 scalar`) is plain code.
- Resolution. The Python domain tries the name as given, then in the current module and class;
  `_missing_reference` then tries `gradtx.<name>`, then the page's module prefixes, then, for a
  gradtx path documented under another (a private path, `gradtx._core.rule.update_rule`; an alias,
  `gradtx.sgd`), the path the same object is documented under.
  Some names in backticks are not gradtx's objects, and `_ArgumentsAreCode` leaves them as code,
  without a link and without a warning: an argument of the function or class being described
  (`learning_rate`, `count`, `scale` in a projection's docstring); a bare name that is also an
  argument or a slot elsewhere (`momentum`, `scale`, `trace`, `tree`), unless it is a whole table
  cell; a bare name after another's possessive ("Flax's `TrainState`"), except optax's, which links
  to gradtx's mirror of it ("optax's `adam`": `gradtx.optax_compat.adam`). A private path that
  exists names the implementation, which has no entry: code. A `gradtx.<...>` or
  `optax_compat.<...>` path that is documented nowhere is a broken reference: it warns (an error
  under -W), so that the docstring is fixed (`KNOWN_BROKEN` lists those this site cannot fix yet).
- `_LinkInlineLiterals`. MyST's inline code (single backticks on the guides, in the tables the
  scripts generate, in the notebooks' Markdown) is a literal, not a role. A literal whose text is
  exactly a documented name (`gradtx.adam`, `gradtx.parallel.sharded_state`,
  `parallel.sharded_state`, or a bare `adam` or `chain` where `gradtx.<text>` is documented; a dotted
  path documented under another, as above), optionally followed by `()` or `(...)`, becomes a link
  to its entry; literals inside a link, a
  heading or a code block stay as they are. Bare names are read as in the docstrings (the
  possessive, the names that are also arguments), and tables add context: in a column headed by a
  module's name in code (`gradtx.optax_compat`), a bare name is that module's first; a column
  headed "key" holds configuration keys (RETURNN's `momentum`, `adam`), not gradtx's objects.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

from docutils import nodes, utils
from docutils.parsers.rst.states import Inliner
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.builders import Builder
from sphinx.environment import BuildEnvironment
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

_log = logging.getLogger(__name__)

NAME = re.compile(r"(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?P<call>\(\)|\(\.\.\.\))?")
"""A name as inline code may write it: an identifier or a dotted path, optionally called."""

ROLE = "gradtx-code"
MARK = "gradtx_default_role"  # on the cross-references the default role makes
KNOWN_BROKEN: dict[str, str] = {}
"""`gradtx.<...>` names in docstrings this site cannot fix yet that name no documented object: shown as code,
without the warning. Each says where it is; remove it when that docstring is fixed."""
NOT_NAMES_HEADERS = frozenset({"key", "keys"})
"""Table column headings whose cells are configuration keys, not gradtx names."""


def name_of(text: str) -> str | None:
    """The name that inline code `text` writes (`adam(...)` -> `adam`), or None for other code."""
    match = NAME.fullmatch(text)
    return match["name"] if match else None


# --------------------------------------------------------------------------- the default role


def code_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Inliner,
    options: dict[str, Any] | None = None,
    content: list[str] | None = None,
) -> tuple[list[nodes.Node], list[nodes.system_message]]:
    """Single backticks: a `py:obj` cross-reference for a name, plain inline code for anything else."""
    plain = utils.unescape(text)
    target = name_of(plain)
    if target is None:
        return [nodes.literal(rawtext, plain)], []
    env = inliner.document.settings.env
    obj_role = env.get_domain("py").role("obj")
    assert obj_role is not None
    source = text if target == plain else f"{plain} <{target}>"  # `adam(...)`: shown as written
    made, messages = obj_role("py:obj", rawtext, source, lineno, inliner, options or {}, content or [])
    for node in made:
        if isinstance(node, addnodes.pending_xref):
            node[MARK] = True
    return made, messages


# --------------------------------------------------------------------------- what is documented


class _Documented:
    """The Python domain's objects after reading: by path, by identity, and which bare names are also
    argument names. Made once per build (`env-updated`) before the pages are written."""

    def __init__(self, env: BuildEnvironment) -> None:
        self.objects: dict[str, Any] = dict(env.get_domain("py").objects)  # type: ignore[attr-defined]
        self.by_id: dict[int, str] = {}
        self.prefixes: dict[str, list[str]] = {}
        arguments: set[str] = set()
        counts: dict[str, dict[str, int]] = {}
        for path, entry in sorted(self.objects.items()):
            prefix = path.rpartition(".")[0]
            if prefix and getattr(self.objects.get(prefix), "objtype", None) == "module":
                page = counts.setdefault(entry.docname, {})
                page[prefix] = page.get(prefix, 0) + 1
            if not path.startswith("gradtx"):
                continue
            obj = _import(path)
            if obj is _MISSING or isinstance(obj, (int, float, str, bool, tuple, dict, type(None))):
                continue
            self.by_id.setdefault(id(obj), path)
            if entry.objtype in ("function", "class", "method") and callable(obj):
                try:
                    arguments.update(inspect.signature(obj).parameters)
                except (TypeError, ValueError):
                    pass
        for docname, page in counts.items():
            self.prefixes[docname] = sorted(page, key=lambda p: (-page[p], p))
        self.ambiguous = {n for n in arguments if f"gradtx.{n}" in self.objects}

    def entry(self, path: str) -> Any:
        return self.objects.get(path)


_MISSING = object()
_STATE: dict[str, _Documented] = {}
_BUILDER: dict[str, Builder] = {}  # the build's (set at builder-inited; a transform has no app)


def _import(path: str) -> Any:
    """The object at a dotted path (a module, or attributes of the longest importable module)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001  (a module that fails to import is simply not found)
            return _MISSING
        for attr in parts[i:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def _documented(env: BuildEnvironment) -> _Documented:
    if "now" not in _STATE:
        _STATE["now"] = _Documented(env)
    return _STATE["now"]


def _env_updated(app: Sphinx, env: BuildEnvironment) -> list[str]:
    _STATE["now"] = _Documented(env)
    return []


def _builder_inited(app: Sphinx) -> None:
    _BUILDER["now"] = app.builder


def _link(env: BuildEnvironment, fromdoc: str, path: str, child: nodes.Node) -> nodes.reference:
    entry = _documented(env).entry(path)
    return make_refnode(_BUILDER["now"], fromdoc, entry.docname, entry.node_id, child, path)


# --------------------------------------------------------------------------- resolution


def resolve(documented: _Documented, target: str, docname: str) -> str | None:
    """The documented path a cross-reference's `target` means, or None."""
    target = target.removesuffix("()")
    candidates = [target, f"gradtx.{target}"]
    candidates += [f"{prefix}.{target}" for prefix in documented.prefixes.get(docname, ())]
    for candidate in candidates:
        if candidate in documented.objects:
            return candidate
    return same_object(documented, target)


def same_object(documented: _Documented, path: str) -> str | None:
    """The documented path of the object at a gradtx `path` documented under another one: a private
    path (`gradtx._core.rule.update_rule`), an alias (`gradtx.sgd` is `gradtx.gradient_descent`),
    optax_compat's name of a gradtx object (`optax_compat.projections.projection_simplex`)."""
    if "." not in path:
        return None
    full = path if path.startswith("gradtx.") else f"gradtx.{path}"
    obj = _import(full)
    if obj is _MISSING or isinstance(obj, (int, float, str, bool, tuple, dict, type(None))):
        return None
    return documented.by_id.get(id(obj))


def _missing_reference(
    app: Sphinx, env: BuildEnvironment, node: addnodes.pending_xref, contnode: nodes.Element
) -> nodes.reference | None:
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    found = resolve(_documented(env), target, node["refdoc"])
    if found is not None:
        return _link(env, node["refdoc"], found, contnode)
    if target in KNOWN_BROKEN or _private(target):
        return None  # code, unlinked: see KNOWN_BROKEN, and `_private`
    if target.startswith("gradtx.") or target.startswith("optax_compat."):
        _log.warning(
            "`%s` looks like a gradtx object but is documented nowhere: fix the name in the docstring",
            target,
            location=node,
            type="gradtx",
            subtype="ref",
        )
    return None


def _private(target: str) -> bool:
    """A path through a private module (`gradtx._core.rule.Slot`) that exists: the docstring names the
    implementation, which has no entry to link to; shown as code."""
    return "._" in target and _import(target) is not _MISSING


def _arguments(desc: addnodes.desc) -> set[str]:
    names = set()
    for signature in desc.findall(addnodes.desc_signature):
        for parameter in signature.findall(addnodes.desc_parameter):
            for name in parameter.findall(addnodes.desc_sig_name):
                names.add(name.astext())
                break
    return names


class _ArgumentsAreCode(SphinxPostTransform):
    """A name in backticks that is an argument of the object being described stays code, unlinked; so does
    a bare name that is also an argument or a slot elsewhere (`momentum`), unless it is a whole table cell."""

    default_priority = 5  # before the references are resolved (10)

    def run(self, **kwargs: Any) -> None:
        documented = _documented(self.env)
        for node in list(self.document.findall(addnodes.pending_xref)):
            if not node.get(MARK) or "." in node["reftarget"]:
                continue
            target = node["reftarget"].removesuffix("()")
            theirs = _anothers(documented, node, target)
            if theirs:
                node["reftarget"] = theirs
                continue
            if theirs == "" or (target in documented.ambiguous and not _whole_cell(node)):
                node.replace_self(node.children)
                continue
            parent = node.parent
            while parent is not None:
                if isinstance(parent, addnodes.desc) and target in _arguments(parent):
                    node.replace_self(node.children)
                    break
                parent = parent.parent


# --------------------------------------------------------------------------- MyST inline code

_SKIP = (
    nodes.reference,
    addnodes.pending_xref,
    nodes.FixedTextElement,  # code blocks, doctest blocks
    nodes.title,
    nodes.raw,
    addnodes.desc_signature,
)


def _column_heading(node: nodes.Node) -> str | None:
    """The heading text of the table column that `node` is in, or None outside a table body."""
    entry = next((a for a in _ancestors(node) if isinstance(a, nodes.entry)), None)
    if entry is None or not isinstance(entry.parent, nodes.row):
        return None
    row = entry.parent
    column = row.index(entry)
    group = row.parent
    if isinstance(group, nodes.thead):
        return None
    tgroup = group.parent if group is not None else None
    heads = list(tgroup.findall(nodes.thead)) if tgroup is not None else []
    if not heads or not heads[0].children:
        return None
    header = heads[0].children[0]
    if column >= len(header.children):
        return None
    return header.children[column].astext().strip()


_POSSESSIVE = re.compile(r"(\w+)['\u2019]s\s+$")


def _owner(node: nodes.Node) -> str | None:
    """The possessive the name follows ("Flax's `TrainState`" -> "flax"), or None."""
    parent = node.parent
    if parent is None:
        return None
    index = parent.index(node)
    before = parent[index - 1] if index > 0 else None
    match = _POSSESSIVE.search(before.astext()) if isinstance(before, nodes.Text) else None
    return match[1].lower() if match else None


def _anothers(documented: _Documented, node: nodes.Node, name: str) -> str | None:
    """For a bare name after another's possessive: "optax's `adam`" is optax's, which gradtx mirrors
    as `gradtx.optax_compat.adam` (that path, when documented); "Flax's `TrainState`" is Flax's, not
    gradtx's object of that name (""). None for a name without another's possessive."""
    owner = _owner(node)
    if owner is None or owner == "gradtx":
        return None
    mirrored = f"gradtx.optax_compat.{name}"
    return mirrored if owner == "optax" and mirrored in documented.objects else ""


def _whole_cell(node: nodes.Node) -> bool:
    """Whether `node` is all the text of the table cell it is in."""
    entry = next((a for a in _ancestors(node) if isinstance(a, nodes.entry)), None)
    return entry is not None and entry.astext().strip() == node.astext().strip()


class _LinkInlineLiterals(SphinxPostTransform):
    """Inline code that is exactly a documented name links to its entry."""

    default_priority = 6  # after _ArgumentsAreCode, before the references are resolved

    def run(self, **kwargs: Any) -> None:
        documented = _documented(self.env)
        docname = self.env.docname
        for node in list(self.document.findall(nodes.literal)):
            if "xref" in node["classes"] or any(isinstance(a, _SKIP) for a in _ancestors(node)):
                continue
            name = name_of(node.astext())
            if name is None:
                continue
            path = self._path(documented, node, name)
            if path is not None:
                node.replace_self(_link(self.env, docname, path, node.deepcopy()))

    @staticmethod
    def _path(documented: _Documented, node: nodes.literal, name: str) -> str | None:
        heading = _column_heading(node)
        if heading is not None and heading.lower() in NOT_NAMES_HEADERS:
            return None
        candidates = [name, f"gradtx.{name}"]
        theirs = _anothers(documented, node, name) if "." not in name else None
        if theirs is not None:
            return theirs or None
        if "." not in name:
            module = documented.entry(heading) if heading else None
            if module is not None and module.objtype == "module":
                candidates.insert(0, f"{heading}.{name}")
            elif name in documented.ambiguous and not _whole_cell(node):
                return None
        found = next((c for c in candidates if c in documented.objects), None)
        return found or same_object(documented, name)


def _ancestors(node: nodes.Node) -> list[nodes.Node]:
    out = []
    parent = node.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_role(ROLE, code_role)
    app.connect("builder-inited", _builder_inited)
    app.connect("env-updated", _env_updated)
    app.connect("missing-reference", _missing_reference)
    app.add_post_transform(_ArgumentsAreCode)
    app.add_post_transform(_LinkInlineLiterals)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
