"""optax's own tests, run against `gradtx.optax_compat` where they touch the names it covers.

Each optax test file (shipped in optax's wheel) is executed with its optax modules (the
`optax._src` modules of the optimizers, the public and private modules of `optax.transforms`
and `optax.schedules`) replaced by views that answer with `gradtx.optax_compat`'s object
where it has the name. A test that reaches for a name optax_compat does not have is
skipped when it does (so nothing here runs optax against itself); optax's helpers (`base`,
`test_utils`, `optax.tree`; `utils` and `numerics` except in their own test files, `ONLY_IN`)
stay optax's. Where gradtx differs on
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

import jax
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
    "optax.transforms._combining",
    "optax.transforms._conditionality",
    "optax.transforms._constraining",
    "optax.transforms._freezing",
    "optax.transforms._layouts",
    "optax.transforms._masking",
    "optax.schedules",
    "optax.schedules._inject",
    "optax.schedules._join",
    "optax.schedules._schedule",
    "optax._src.linear_algebra",
    "optax._src.lookahead",
    "optax._src.numerics",
    "optax._src.utils",
)
"""optax's modules that hold optimizer-facing names: an optax test file imports views of them."""

ONLY_IN = {
    "optax._src.numerics": "_src/numerics_test.py",
    "optax._src.utils": "_src/utils_test.py",
}
"""Replaced modules seen as views only by the test file named (the others keep optax's helpers in them,
e.g. alias_test's `numerics.abs_sq`)."""

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
    "transforms/_combining_test.py",
    "transforms/_constraining_test.py",
    "transforms/_freezing_test.py",
    "transforms/_layouts_test.py",
    "schedules/_schedule_test.py",
    "schedules/_join_test.py",
    "schedules/_inject_test.py",
    "_src/lookahead_test.py",
    "_src/linear_algebra_test.py",
    "_src/numerics_test.py",
    "_src/utils_test.py",
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
    (
        (ValueError, AssertionError),  # raised, or met by optax's assertRaisesRegex for its own message
        r"`masked`: `mask` and params must match",
        "a mask that does not fit the params is refused naming the leaves on each side (optax: "
        "jax's 'Dict key mismatch')",
    ),
    (
        ValueError,
        r"`scale_by_polyak`: updates and params must have the same tree structure",
        "gradients shaped unlike the params are refused before anything else (optax's polyak test passes "
        "a two-leaf gradient with one-leaf params to provoke its missing-`value` TypeError)",
    ),
    (
        AssertionError,
        r"Trees have different structures:\s+PyTreeDef\(CustomNode\(namedtuple\[EmptyState\], \[\]\)\)\s+"
        r"PyTreeDef\(CustomNode\(namedtuple\[EmptyState\]",
        "gradtx's `EmptyState` is its own class (gradtx does not import optax): an empty state equal "
        "to optax's in all but its type",
    ),
    (
        AssertionError,
        r"DeprecationWarning not triggered",
        "optax_compat does not repeat optax's deprecation warnings (optimistic_adam's v1 interface, "
        "dpsgd's seed): the names work as optax's do",
    ),
    (
        jax.errors.ConcretizationTypeError,
        r"depends on the value of the argument state\.hyperparams\['key'\]",
        "noisy SGD's seed is fixed when it is built (gradtx's noise is keyed by the seed, the count and "
        "the leaf), not a hyperparameter `inject_hyperparams` can trace",
    ),
)
"""(exception, message pattern, why): a test that fails this way meets a documented difference."""

NOT_RUN = {
    "LinearAlgebraTest.test_power_iteration_mlp_hessian": "23 s (the Hessian of a flax MLP); power_iteration "
    "over a tree operator against optax's is tests/test_linalg.py's",
    "LinearAlgebraTest.test_nnls": "16 cases of 3 to 5 s (five eager solves each); nnls against optax's is "
    "tests/test_linalg.py's",
    "LinearAlgebraTest.test_matrix_inverse_pth_root": "8 s (ten 16x16 roots, eagerly); "
    "matrix_inverse_pth_root against optax's and the float64 root is tests/test_linalg.py's",
    "ClippingTest.test_clip_by_block_rms": "fails with optax 0.2.8 itself on this jax (RMS 0.9999999 "
    "against 1.0 to 7 places); gradtx's numbers are optax's bit for bit",
    "LBFGSTest": "about a minute; it passes against optax_compat (its tests of optax's private helpers "
    "skip); L-BFGS and the line searches against optax are tests/algorithms/test_lbfgs.py's and "
    "tests/algorithms/test_linesearch.py's",
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
    importer = (globals or {}).get("__name__", "")
    views = {n: v for n, v in VIEWS.items() if n not in ONLY_IN or importer == _module_name(ONLY_IN[n])}
    source = views.get(name, module)
    parent = types.SimpleNamespace()
    for attr in fromlist:
        full = f"{name}.{attr}"
        setattr(parent, attr, views[full] if full in views else getattr(source, attr))
    return parent


def _module_name(relative: str) -> str:
    """The module name an optax test file is executed as."""
    return f"optax_suite.{relative[:-3].replace('/', '.')}"


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
        module = optax_files.load(OPTAX_DIR / relative, _module_name(relative), _import)
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
