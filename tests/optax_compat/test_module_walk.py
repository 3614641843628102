"""Every public name of every public optax module resolves under `gradtx.optax_compat`, or is listed as out of
scope with a reason (`_mirror.OUT_OF_SCOPE`) that the AttributeError gives.

The walk reads the installed optax (0.2.8): its top level and each public submodule, found by
`pkgutil` (so a module optax adds is walked without a change here), and each of their names that is
optax's own (modules a file merely imports, such as `typing`, are left out).
"""

from __future__ import annotations

import collections.abc
import importlib
import importlib.util
import pkgutil
import types
import typing

import pytest

import gradtx.optax_compat as compat
from gradtx.optax_compat import _mirror

optax = pytest.importorskip("optax")


def _public_modules() -> list[str]:
    """optax's public module paths below `optax`: its public packages and files (`losses`), and the private
    modules a public one binds under a public name (`experimental.aggregating`)."""
    found, todo = [""], [("", optax)]
    while todo:
        prefix, package = todo.pop()
        children = {
            info.name: importlib.import_module(f"{package.__name__}.{info.name}")
            for info in pkgutil.iter_modules(package.__path__)
            if not (info.name.startswith("_") or info.name.endswith("_test") or info.name == "optax_test")
        }
        children.update(
            (name, value)
            for name, value in vars(package).items()
            if isinstance(value, types.ModuleType)
            and not name.startswith("_")
            and value.__name__.startswith(f"{package.__name__}._")
        )
        for name, module in children.items():
            path = f"{prefix}.{name}".lstrip(".")
            found.append(path)
            if hasattr(module, "__path__"):
                todo.append((path, module))
    return sorted(set(found))


def _optax_module(path: str) -> types.ModuleType:
    module = optax
    for part in path.split(".") if path else []:
        module = getattr(module, part)
    return module


def _names(path: str) -> list[str]:
    """The public names of `optax.<path>` that are optax's: not its modules (walked as paths of their own, or
    imported for itself, like `base`) nor the typing names it imports."""
    module = _optax_module(path)
    names = []
    for name in dir(module):
        value = getattr(module, name)
        if name.startswith("_") or any(value is getattr(m, name, None) for m in (typing, collections.abc)):
            continue
        if isinstance(value, types.ModuleType):
            continue
        names.append(name)
    return names


def _out_of_scope(path: str, name: str = "") -> str | None:
    full = f"{path}.{name}".strip(".")
    return _mirror.OUT_OF_SCOPE.get(full) or _mirror.OUT_OF_SCOPE.get(full.split(".", 1)[0])


def _resolve(path: str, name: str):
    where = compat
    for part in path.split(".") if path else []:
        where = getattr(where, part)
    return getattr(where, name)


MODULES = _public_modules()


def test_the_walk_finds_optax_s_modules():
    for path in (
        "losses",
        "tree_utils",
        "assignment",
        "microbatching",
        "experimental.aggregating",
        "contrib",
    ):
        assert path in MODULES


@pytest.mark.parametrize("path", MODULES)
def test_every_optax_name_resolves_or_has_a_reason(path):
    if _out_of_scope(path):
        with pytest.raises(AttributeError, match="is a tool for models, not a transform of gradients"):
            _resolve("", path.split(".")[0])
        return
    unresolved = []
    for name in _names(path):
        try:
            _resolve(path, name)
        except AttributeError:
            if not _out_of_scope(path, name):
                unresolved.append(name)
    assert unresolved == [], f"optax.{path or '<top>'}: {unresolved}"


def test_every_module_path_imports_as_a_module():
    """`import gradtx.optax_compat.<path>` works where `import optax.<path>` does."""
    for path in MODULES:
        importable = importlib.util.find_spec(f"optax.{path}") is not None if path else False
        if importable and not _out_of_scope(path):
            assert isinstance(importlib.import_module(f"gradtx.optax_compat.{path}"), types.ModuleType), path


def test_the_old_tree_names_are_the_new_ones():
    assert compat.tree_utils.tree_get is compat.tree.get
    assert compat.tree_utils.tree_map_params is compat.tree.map_params
