"""The house rules of the package's layout, read from its source (no import of the modules they judge).

- `gradtx/_core/` is below everything: it imports nothing from the rest of gradtx.
- The algorithm modules (`gradtx/_algorithms/`) and the combinators import the core, the
  combinators and (algorithms only) each other, never a public namespace that gathers them.
- Collectives (`psum`, `all_gather`, ...) appear only in `gradtx/parallel/`.
- No module imports itself back through others (no import circle).
- `gradtx.transforms` and `gradtx.optimizers` are generated from the algorithm modules' `__all__`.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gradtx"
sys.path.insert(0, str(ROOT / "tools"))

import namespaces  # noqa: E402


def _module(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> set[str]:
    """The gradtx modules `name` imports (a `from pkg import sub` names the submodule when there is one)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m == "gradtx" or m.startswith("gradtx.")}


def test_the_core_imports_nothing_above_it():
    for name in (m for m in MODULES if m.startswith("gradtx._core")):
        above = sorted(m for m in _imports(name) if not m.startswith("gradtx._core"))
        assert not above, f"{name} imports {above}"


@pytest.mark.parametrize("package", ["gradtx._algorithms", "gradtx.combinators"])
def test_algorithms_and_combinators_import_downward(package):
    namespaces_ = {"gradtx", "gradtx.transforms", "gradtx.optimizers", "gradtx.combinators"}
    for name in (m for m in MODULES if m.startswith(package + ".")):
        imported = _imports(name)
        assert not imported & namespaces_, f"{name} imports the namespace(s) {sorted(imported & namespaces_)}"
        if package == "gradtx.combinators":
            up = sorted(m for m in imported if m.startswith("gradtx._algorithms"))
            assert not up, f"{name} imports the algorithm module(s) {up}"


def test_collectives_live_in_parallel_only():
    collectives = ("psum", "pmean", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "psum_scatter")
    for name, path in MODULES.items():
        if name.startswith("gradtx.parallel"):
            continue
        calls = {
            node.attr
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr in collectives
        }
        assert not calls, f"{name} calls the collective(s) {sorted(calls)}"


def test_no_import_circle():
    graph = {name: _imports(name) & MODULES.keys() for name in MODULES}
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for nxt in sorted(graph[name]):
            # a package's own modules may import the package's names once it has bound them: only a
            # circle through a module that is not the importer's own package counts
            if name.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                raise AssertionError(f"import circle: {' -> '.join([*path, name, nxt])}")
            if nxt not in state:
                visit(nxt, [*path, name])
        state[name] = 2

    for name in MODULES:
        if name not in state:
            visit(name, [])


@pytest.mark.parametrize("kind", ["transforms", "optimizers"])
def test_the_namespaces_gather_every_algorithm_module(kind):
    """`gradtx.transforms` and `gradtx.optimizers` are generated from the algorithm modules' `__all__`: a new
    module joins them by running the generator, and no name is listed by hand."""
    expected = namespaces.render(kind, namespaces.homes()[kind])
    assert (PACKAGE / f"{kind}.py").read_text() == expected, "run `python tools/namespaces.py --write`"
