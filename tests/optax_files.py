"""Running optax's own test files (shipped in its wheel) against gradtx: a file executed with its imports
redirected, and the test classes it defines."""

from __future__ import annotations

import builtins
import pathlib
import sys
import types
import unittest
from typing import Any, Callable, Iterator


def load(path: pathlib.Path, name: str, importer: Callable[..., Any]) -> types.ModuleType:
    """Execute the test file `path` as module `name`, its `import` statements going through `importer`."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__["__builtins__"] = {**vars(builtins), "__import__": importer}
    sys.modules[name] = module  # (its dataclasses look their module up)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def case_classes(module: types.ModuleType) -> Iterator[tuple[str, type]]:
    """The `unittest.TestCase` classes `module` defines itself (not those it imports)."""
    for name, cls in vars(module).items():
        if isinstance(cls, type) and issubclass(cls, unittest.TestCase) and cls.__module__ == module.__name__:
            yield name, cls
