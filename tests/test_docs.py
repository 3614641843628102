"""Every public name is documented: a summary, Args / Returns, a runnable example; building blocks show their
math.

The examples themselves run as doctests (`--doctest-modules` over gradtx/, see pyproject).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools

import pytest

from tests import catalog

PUBLIC_MODULES = [
    "gradtx",
    "gradtx.transforms",
    "gradtx.combinators",
    "gradtx.optimizers",
    "gradtx.optax_compat",
    "gradtx.optax_compat.schedules",
    "gradtx.schedules",
    "gradtx.sparse",
    "gradtx.parallel",
    "gradtx.registry",
    "gradtx.checkpoint",
    "gradtx.packing",
    "gradtx.tree",
    "gradtx.numerics",
    "gradtx.linalg",
    "gradtx.projections",
    "gradtx.second_order",
    "gradtx.losses",
    "gradtx.assignment",
    "gradtx.aggregating",
]


def _public() -> list[tuple[str, object]]:
    seen, out = set(), []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        assert hasattr(module, "__all__"), f"{module_name} has no __all__"
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) not in seen:
                seen.add(id(obj))
                out.append((f"{module_name}.{name}", obj))
    return out


PUBLIC = _public()
OURS = [
    (n, o)
    for n, o in PUBLIC
    if getattr(o, "__module__", "").startswith("gradtx") and (inspect.isfunction(o) or inspect.isclass(o))
]
FUNCTIONS = [(n, o) for n, o in OURS if inspect.isfunction(o)]
CLASSES = [(n, o) for n, o in OURS if inspect.isclass(o)]
ALIASES = [(n, o) for n, o in PUBLIC if (n, o) not in OURS and not inspect.ismodule(o)]


def _own_doc(obj) -> str:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    if (
        inspect.isclass(obj)
        and hasattr(obj, "_fields")
        and doc == f"{obj.__name__}({', '.join(obj._fields)})"
    ):
        return ""  # the one namedtuple writes by itself
    return inspect.cleandoc(doc or "")


def _attribute_docstrings(module_name: str) -> dict[str, str]:
    """`name = value` followed by a string literal, in a module's source (how type aliases are documented)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    docs = {}
    for stmt, nxt in itertools.pairwise(tree.body):
        if not (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            continue
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, ast.AnnAssign)
            else []
        )
        docs.update({t.id: nxt.value.value for t in targets if isinstance(t, ast.Name)})
    return docs


ATTRIBUTE_DOCS = {
    k: v
    for m in [
        "gradtx._core.protocol",
        "gradtx._core.registry",
        "gradtx.train",
        "gradtx",
        "gradtx._core.packed_layout",
        "gradtx.combinators._aggregating",
        *PUBLIC_MODULES[1:],
    ]
    for k, v in _attribute_docstrings(m).items()
}


def test_the_public_api_is_what_these_tests_cover():
    assert len(FUNCTIONS) > 100 and len(CLASSES) > 30 and {n for n, _ in ALIASES} >= {"gradtx.Schedule"}


@pytest.mark.parametrize("name, obj", OURS, ids=[n for n, _ in OURS])
def test_every_public_function_and_class_has_a_summary(name, obj):
    doc = _own_doc(obj)
    assert doc, f"{name} has no docstring"
    summary = doc.splitlines()[0]
    assert len(summary) >= 10 and not summary.endswith(":"), f"{name}: the first line should say what it does"


@pytest.mark.parametrize("name, obj", ALIASES, ids=[n for n, _ in ALIASES])
def test_every_public_constant_and_type_alias_has_an_attribute_docstring(name, obj):
    assert name.rsplit(".", 1)[1] in ATTRIBUTE_DOCS, (
        f"{name}: document it with a string literal after its assignment"
    )


@pytest.mark.parametrize("name, fn", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_every_public_function_documents_args_returns_and_an_example(name, fn):
    doc = _own_doc(fn)
    signature = inspect.signature(fn)
    if any(p.kind is not p.VAR_KEYWORD for p in signature.parameters.values()):
        assert "Args:" in doc, f"{name}: no Args section"
    if signature.return_annotation not in (None, "None"):
        assert "Returns:" in doc, f"{name}: no Returns section"
    assert ">>> " in doc, f"{name}: no runnable example"


@pytest.mark.parametrize("name, cls", CLASSES, ids=[n for n, _ in CLASSES])
def test_public_methods_of_public_classes_have_docstrings(name, cls):
    for attr, member in vars(cls).items():
        if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
            continue
        assert (member.__doc__ or "").strip(), f"{name}.{attr} has no docstring"


_BLOCKS = [e for e in catalog.entries("transform") if e.name.startswith("scale_by")]
_TRIVIAL = {"scale_by_learning_rate", "scale_by_schedule"}  # a multiplication: no paper to cite


@pytest.mark.parametrize("entry", _BLOCKS, ids=[e.name for e in _BLOCKS])
def test_building_blocks_show_their_math_and_references(entry):
    doc = _own_doc(entry.factory)
    assert ".. math::" in doc, f"{entry.name}: the building block carries the math"
    if entry.name not in _TRIVIAL:
        assert "References:" in doc, f"{entry.name}: no References section"


_NAMED = [e for e in catalog.entries("optimizer") if e.reference]


@pytest.mark.parametrize("entry", _NAMED, ids=[e.name for e in _NAMED])
def test_optimizers_name_the_system_they_reproduce(entry):
    reproduced = entry.reference.split()[-1].rsplit(".", 1)[
        -1
    ]  # "tf.compat.v1.train.AdamOptimizer" -> "AdamOptimizer"
    assert reproduced in _own_doc(entry.factory), f"{entry.name}: its docstring should name {reproduced}"


_FACTORIES = [e for e in catalog.entries() if inspect.signature(e.factory).parameters]


@pytest.mark.parametrize("entry", _FACTORIES, ids=[e.name for e in _FACTORIES])
def test_factories_document_the_errors_their_arguments_raise(entry):
    assert "Raises:" in _own_doc(entry.factory), (
        f"{entry.name}: checks its arguments but has no Raises section"
    )
