"""The API reference's model: its pages, and every public object of gradtx with the page, section and
path it is documented under (`collect`). tools/api_pages.py renders the pages from it."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pathlib
import re
import sys
import types
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
API_DIR = ROOT / "docs" / "api"

SUBPACKAGES = (
    "transforms",
    "combinators",
    "optimizers",
    "schedules",
    "sparse",
    "packing",
    "parallel",
    "checkpoint",
    "tree",
    "returnn",
    "numerics",
    "linalg",
    "projections",
    "second_order",
    "losses",
    "assignment",
    "aggregating",
    "registry",
    "train",
    "slots",
    "optax_compat",
    "optax_compat.contrib",
    "optax_compat.transforms",
    "optax_compat.schedules",
    "optax_compat.projections",
    "optax_compat.second_order",
    "optax_compat.tree",
    "optax_compat.tree_utils",
    "optax_compat.losses",
    "optax_compat.assignment",
    "optax_compat.microbatching",
    "optax_compat.experimental",
    "optax_compat.experimental.aggregating",
)
"""Every public module whose names the reference covers (besides `gradtx` itself)."""

SECTION_TITLES = {
    "gradtx": "Types and constants",
    "gradtx._core.updates": "Applying updates",
    "gradtx._core.rule": "The rule constructor",
    "gradtx.slots": "Slots by name",
}
"""Section headings where the defining module's docstring does not give a short one."""


@dataclasses.dataclass(frozen=True)
class Page:
    slug: str
    title: str
    modules: tuple[str, ...]  # the modules whose names it holds, automodule'd in this order
    intro: str = ""
    sections: str = "module"  # "module": a section per defining module (an algorithm's, a
    # combinator's); "package": a section per entry of `modules`


PAGES = (
    Page(
        "core",
        "Core: the protocol, update rules, slots",
        ("gradtx", "gradtx.slots"),
        "The transformation protocol, the one rule constructor (`update_rule`), TF slots by name, and "
        "the names of the top level that belong to no subpackage.",
    ),
    Page(
        "transforms",
        "Building blocks",
        ("gradtx.transforms",),
        "One section per algorithm's module; each building block carries the math of its rule.",
    ),
    Page(
        "optimizers",
        "Optimizers, by algorithm",
        ("gradtx.optimizers",),
        "Each optimizer is a chain of building blocks, in its algorithm's module (a section here, and on "
        "the [building blocks](transforms.md) page); its docstring says which system it reproduces. The "
        "[registry tables](registry.md) list every optimizer with its aliases.",
    ),
    Page("combinators", "Combinators", ("gradtx.combinators",), "Routing, pre- and post-processing."),
    Page("schedules", "Schedules", ("gradtx.schedules",)),
    Page("sparse", "Sparse gradients", ("gradtx.sparse",)),
    Page("packing", "Packing many small leaves", ("gradtx.packing",)),
    Page("parallel", "Parallel: data parallelism, ZeRO, averaging", ("gradtx.parallel",)),
    Page("train", "Training loops: minimize, optimize_loss", ("gradtx.train",)),
    Page("checkpoint", "Checkpoints", ("gradtx.checkpoint",)),
    Page("tree", "Tree utilities", ("gradtx.tree",)),
    Page(
        "numerics",
        "Numerics, linear algebra, projections, second order",
        ("gradtx.numerics", "gradtx.linalg", "gradtx.projections", "gradtx.second_order"),
        sections="package",
    ),
    Page(
        "losses",
        "Losses, assignment, aggregators",
        ("gradtx.losses", "gradtx.assignment", "gradtx.aggregating"),
        "What optax programs use besides optimizers, with optax's names and numbers: its losses, the "
        "Hungarian algorithm, and the aggregators of per-example gradients.",
        sections="package",
    ),
    Page("returnn", "RETURNN configs", ("gradtx.returnn",)),
    Page(
        "optax_compat",
        "optax_compat: optax's names with optax's numbers",
        (
            "gradtx.optax_compat",
            "gradtx.optax_compat.contrib",
            "gradtx.optax_compat.transforms",
            "gradtx.optax_compat.schedules",
            "gradtx.optax_compat.projections",
            "gradtx.optax_compat.second_order",
            "gradtx.optax_compat.tree",
            "gradtx.optax_compat.tree_utils",
            "gradtx.optax_compat.losses",
            "gradtx.optax_compat.assignment",
            "gradtx.optax_compat.microbatching",
            "gradtx.optax_compat.experimental",
            "gradtx.optax_compat.experimental.aggregating",
        ),
        "Most names mirror optax's; see the [From optax](../guides/from-optax.md) guide for the table "
        "of optax's names.",
        sections="package",
    ),
    Page(
        "registry",
        "The registry",
        ("gradtx.registry",),
        "Names to factories. The tables below list every registered entry by kind.",
        sections="package",
    ),
)


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def public_names(module: str) -> list[str]:
    """The public names of `module`: its `__all__`, or (gradtx.train, gradtx.slots: modules
    without one) the names of `gradtx.__all__` that are its objects."""
    import gradtx

    mod = _module(module)
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    return [n for n in gradtx.__all__ if n in vars(mod) and getattr(gradtx, n) is vars(mod)[n]]


def _kind(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if obj is Any or getattr(obj, "__module__", None) in ("typing", "types", "collections.abc"):
        return "data"  # a type alias
    if inspect.isclass(obj):
        return "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    return "data"


def _identity_key(obj: Any) -> int | None:
    """Objects deduplicated by identity (functions, classes, typing aliases), not plain data."""
    if obj is Any or isinstance(obj, (int, float, str, bool, tuple, dict, type(None))):
        return None
    return id(obj)


@dataclasses.dataclass
class Item:
    path: str  # the documented path
    obj: Any
    kind: str
    page: str
    section: str
    alias_of: str | None = None  # the path it is documented under, when it is another's object


def _home_module(obj: Any) -> str:
    return getattr(obj, "__module__", "") or ""


def _section(page: Page, module: str, obj: Any) -> str:
    if page.sections == "package":
        return module
    home = _home_module(obj)
    return home if "._" in home else module  # a private module: its algorithm, combinator, core part


def collect() -> list[Item]:
    """Every public (module, name) as an Item, in page order; each object documented once."""
    import gradtx

    top = set(gradtx.__all__)
    # which page holds a top-level name: the first page whose modules export that object (not
    # optax_compat, which mirrors optax's names); the core page when none does
    owner: dict[str, str] = {}
    for page in PAGES:
        for module in page.modules:
            if module == "gradtx" or module.startswith("gradtx.optax_compat"):
                continue
            for name in public_names(module):
                same = name in top and getattr(gradtx, name) is getattr(_module(module), name)
                if same and name not in owner:
                    owner[name] = page.slug
    items: list[Item] = []
    documented: dict[int, str] = {}
    seen_paths: set[str] = set()
    for page in PAGES:
        for module in page.modules:
            names = sorted(public_names(module), key=str.lower)
            mod = _module(module)
            for name in names:
                obj = getattr(mod, name)
                kind = _kind(obj)
                if kind == "module":
                    continue  # a subpackage: documented by its page's automodule
                at_top = name in top and getattr(gradtx, name) is obj
                if at_top and owner.get(name, "core") != page.slug:
                    continue  # documented on its owner's page
                path = f"gradtx.{name}" if at_top else f"{module}.{name}"
                if path in seen_paths:
                    continue
                seen_paths.add(path)
                key = _identity_key(obj)
                section = _section(page, module, obj)
                alias_of = documented.get(key) if key is not None else None
                if key is not None and alias_of is None:
                    documented[key] = path
                items.append(Item(path, obj, kind, page.slug, section, alias_of))
    return items


def _data_doc(obj: Any, name: str) -> str:
    """The docstring written under the assignment that defines `obj` (a constant or a type alias)."""
    from sphinx.pycode import ModuleAnalyzer

    found = []
    for modname, mod in sorted(sys.modules.items()):
        if not (modname == "gradtx" or modname.startswith("gradtx.")) or mod is None:
            continue
        names = [attr for attr, value in list(vars(mod).items()) if value is obj]
        source = pathlib.Path(getattr(mod, "__file__", None) or "/nonexistent")
        if not names or not source.is_file():
            continue
        text = source.read_text()
        if not any(re.search(rf"^{attr}\s*(?::[^=\n]*)?=", text, flags=re.M) for attr in names):
            continue  # only imported here
        if modname not in _ATTR_DOCS:
            try:
                _ATTR_DOCS[modname] = ModuleAnalyzer.for_module(modname).find_attr_docs()
            except Exception:  # noqa: BLE001  (a module without source)
                _ATTR_DOCS[modname] = {}
        for (scope, attr), lines in _ATTR_DOCS[modname].items():
            if scope == "" and vars(mod).get(attr, _MISSING) is obj:
                found.append((attr != name, modname, lines))
    if not found:
        return ""
    return "\n".join(min(found)[2]).strip()


_MISSING = object()
_ATTR_DOCS: dict[str, Any] = {}
