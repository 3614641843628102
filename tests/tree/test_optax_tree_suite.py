"""optax's own tests of `optax.tree` (the `tree_utils` test files in its wheel), run against `gradtx.tree`.

Each test file is executed with `optax.tree_utils` (and its private modules `_casting`,
`_random`, `_state_utils`, `_tree_math`) replaced by a view whose `tree_<name>` is
`gradtx.tree.<name>` and whose `NamedTupleKey` is gradtx's; everything else (the optimizers
whose states they search, `test_utils`) stays optax's.
"""

from __future__ import annotations

import builtins
import pathlib
import types

import pytest

import gradtx
from gradtx.tree import _state
from tests import optax_files

optax = pytest.importorskip("optax")
pytest.importorskip("absl.testing.parameterized")

TEST_FILES = ("_casting_test.py", "_random_test.py", "_state_utils_test.py")
"""optax's test files run here. `_tree_math_test.py` passes too, but takes seconds of small compiles:
test_tree.py compares each of those functions with optax's own, bit for bit, instead."""

VIEW = types.SimpleNamespace(
    **{f"tree_{name}": getattr(gradtx.tree, name) for name in gradtx.tree.__all__},
    NamedTupleKey=_state.NamedTupleKey,
)
"""`optax.tree_utils` as the test files see it: gradtx's functions under optax's `tree_` names."""

REPLACED = ("tree_utils", "_casting", "_random", "_state_utils", "_tree_math")


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    """`__import__` for an optax test file: `optax.tree_utils` and its modules come back as `VIEW`."""
    module = builtins.__import__(name, globals, locals, fromlist, level)
    if name not in ("optax", "optax.tree_utils") or not fromlist:
        return module
    parent = types.SimpleNamespace()
    for attr in fromlist:
        setattr(parent, attr, VIEW if attr in REPLACED else getattr(module, attr))
    return parent


def _suite_classes() -> dict[str, type]:
    classes = {}
    for filename in TEST_FILES:
        path = pathlib.Path(optax.__file__).parent / "tree_utils" / filename
        module = optax_files.load(path, f"optax_tree_suite.{filename[:-3]}", _import)
        for name, cls in optax_files.case_classes(module):
            title = f"Test_{filename.removesuffix('_test.py').strip('_')}_{name}"
            classes[title] = type(title, (cls,), {"__module__": __name__})
    return classes


globals().update(_suite_classes())
