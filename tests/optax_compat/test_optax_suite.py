"""optax's own tests, run against `gradtx.optax_compat` where they touch the names it covers.

Each optax test file (shipped in optax's wheel) is executed with its optax modules (the
`optax._src` modules of the optimizers, the public and private modules of `optax.transforms`
and `optax.schedules`) replaced by views that answer with `gradtx.optax_compat`'s object
where it has the name. A test that reaches for a name optax_compat does not have is
skipped when it does (so nothing here runs optax against itself); optax's helpers (`base`,
`utils`, `numerics`, `test_utils`, `optax.tree`) stay optax's. Where gradtx differs on
purpose, the test is skipped only when it fails with gradtx's documented error (`KNOWN`).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import pathlib
import re
import types
import unittest
from typing import Any

import pytest

import gradtx.optax_compat as compat
from tests import optax_files

optax = pytest.importorskip("optax")

OPTAX_DIR = pathlib.Path(optax.__file__).parent

REPLACED = (
    "optax._src.alias",
    "optax._src.transform",
    "optax._src.combine",
    "optax._src.update",
    "optax.transforms",
    "optax.transforms._accumulation",
    "optax.transforms._adding",
    "optax.transforms._clipping",
    "optax.transforms._conditionality",
    "optax.transforms._masking",
    "optax.schedules",
    "optax.schedules._inject",
    "optax.schedules._join",
    "optax.schedules._schedule",
)
"""optax's modules that hold optimizer-facing names: an optax test file imports views of them."""

TEST_FILES = (
    "_src/alias_test.py",
    "_src/transform_test.py",
    "_src/combine_test.py",
    "_src/update_test.py",
    "transforms/_masking_test.py",
    "transforms/_accumulation_test.py",
    "transforms/_adding_test.py",
    "transforms/_clipping_test.py",
    "transforms/_conditionality_test.py",
    "schedules/_schedule_test.py",
    "schedules/_join_test.py",
    "schedules/_inject_test.py",
)

KNOWN = (
    (
        TypeError,
        r"`scale_by_factored_rms`: the gradient at .* is complex",
        "Adafactor's factored moments refuse complex params with a clear error (optax keeps real "
        "statistics in a complex dtype)",
    ),
    (
        ValueError,
        r"`scale_by_lion`: `mode` must be one of",
        "an unknown Lion mode is refused when the transform is built (optax: at its first update)",
    ),
    (
        TypeError,
        r"the (gradient|parameter) at .* is (int|uint|bool)\d*, but this rule's updates are fractional",
        "integer parameters and gradients are refused by the rules whose updates are fractional (optax "
        "rounds every such update away)",
    ),
)
"""(exception, message pattern, why): a test that fails this way meets a documented difference."""

NOT_RUN = {
    "ClippingTest.test_clip_by_block_rms": "fails with optax 0.2.8 itself on this jax (RMS 0.9999999 "
    "against 1.0 to 7 places); gradtx's numbers are optax's bit for bit",
    "LBFGSTest": "optax's L-BFGS and its line searches are not in optax_compat yet (they run optax's own "
    "code only)",
    "AliasTest.test_state_shape_dtype_shard_stability": "40 s; every registered optimizer's state "
    "placement and dtypes under jit are tests/test_placement.py's and tests/test_state_dtypes.py's",
    "AliasTest.test_gradient_accumulation": "12 s; MultiSteps over optax_compat's optimizers is "
    "tests/optax_compat/test_multi_steps.py's and test_flax_programs.py's",
    "AccumulationTest.test_multi_steps_mixed_precision": "a minute of eager steps (as long with optax); "
    "tests/optax_compat/test_multi_steps.py compares MultiSteps' dtypes with optax's",
}
"""`Class.test_method` prefix: why it is not run here."""


_TOUCHED = [False]
"""Whether the running test has called one of optax_compat's functions."""


def _tracked(value: Any) -> Any:
    """optax_compat's function `value`, noting each call in `_TOUCHED` (classes and values as they are)."""
    if isinstance(value, type) or not callable(value):
        return value

    @functools.wraps(value)
    def call(*args: Any, **kwargs: Any) -> Any:
        _TOUCHED[0] = True
        return value(*args, **kwargs)

    return call


class _Missing:
    """An optax name optax_compat lacks, met while a test file is defined: calling it skips the test."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise unittest.SkipTest(f"`optax.{self.name}` is not in gradtx.optax_compat")


class _View(types.ModuleType):
    """An optax module whose optimizer-facing names are optax_compat's."""

    def __init__(self, real: types.ModuleType):
        super().__init__(real.__name__)
        self._real = real
        self.defining = True

    def __getattr__(self, name: str) -> Any:
        if name in compat.__all__:
            return _tracked(getattr(compat, name))
        value = getattr(self._real, name)
        if name.startswith("_") or isinstance(value, types.ModuleType) or not callable(value):
            return value
        if self.defining:
            return _Missing(name)
        raise unittest.SkipTest(f"`optax.{name}` is not in gradtx.optax_compat")


VIEWS = {name: _View(importlib.import_module(name)) for name in REPLACED}


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    """`__import__` for an optax test file: the replaced modules come back as views."""
    module = builtins.__import__(name, globals, locals, fromlist, level)
    if not fromlist:
        return module
    source = VIEWS.get(name, module)
    parent = types.SimpleNamespace()
    for attr in fromlist:
        full = f"{name}.{attr}"
        setattr(parent, attr, VIEWS[full] if full in VIEWS else getattr(source, attr))
    return parent


@contextlib.contextmanager
def _known_differences():
    """Turn a failure with one of gradtx's documented errors (`KNOWN`) into a skip saying why."""
    try:
        yield
    except Exception as err:
        for kind, pattern, why in KNOWN:
            if isinstance(err, kind) and re.search(pattern, str(err)):
                raise unittest.SkipTest(f"documented difference: {why}") from err
        raise


def _guarded(method):
    """`method` with `KNOWN` failures skipped, and skipped too when it never called optax_compat."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        _TOUCHED[0] = False
        with _known_differences():
            result = method(self, *args, **kwargs)
        if not _TOUCHED[0]:
            raise unittest.SkipTest("ran optax's own code only: no optax_compat function was called")
        return result

    return run


class _Guarded(unittest.TestCase):
    @contextlib.contextmanager
    def subTest(self, msg: Any = None, **params: Any):  # noqa: N802  (unittest's name)
        with super().subTest(msg, **params), _known_differences():
            yield


def _not_run(why: str):
    def skipped(self, *args, **kwargs):
        raise unittest.SkipTest(why)

    return skipped


def _suite_classes() -> dict[str, type]:
    """optax's test classes, each subclassed here (`Test_<file>_<class>`) with its methods guarded."""
    classes = {}
    for relative in TEST_FILES:
        module = optax_files.load(
            OPTAX_DIR / relative, f"optax_suite.{relative[:-3].replace('/', '.')}", _import
        )
        stem = relative.removesuffix("_test.py").replace("/", "_").replace("__", "_").strip("_")
        for name, cls in optax_files.case_classes(module):
            methods = {}
            for attr in dir(cls):
                if attr.startswith("test"):
                    why = next((w for k, w in NOT_RUN.items() if f"{name}.{attr}".startswith(k)), None)
                    methods[attr] = _not_run(why) if why else _guarded(getattr(cls, attr))
            title = f"Test_{stem}_{name}"
            classes[title] = type(title, (_Guarded, cls), {"__module__": __name__, **methods})
    for view in VIEWS.values():
        view.defining = False
    return classes


globals().update(_suite_classes())
