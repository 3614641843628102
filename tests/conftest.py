"""Test setup: 8 simulated CPU devices, before the first JAX operation."""

import atexit
import os
import shutil
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests import fast_xla  # noqa: E402

# Compiling is most of the suite's time and its programs are tiny: this process compiles with
# `fast_xla`'s options (only Muon's comparisons needed a wider tolerance, `helpers.MUON_TOLERANCE`), and
# so do the notebooks' kernels (`_NotebookFlags`; but for `NOTEBOOKS_WITH_XLA_DEFAULTS`) and the
# multi-process workers (`tests.parallel._worker.environment`). Other subprocesses get the user's flags.
_flags = os.environ.get("XLA_FLAGS")
if fast_xla.wanted():
    os.environ["XLA_FLAGS"] = fast_xla.xla_flags(_flags)

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
# Many tests compile the same program (a rule's step on the same tree, from a new `jax.jit` of a new
# function): JAX's persistent compilation cache, in a directory of this run only, compiles it once. The
# first process (pytest, or xdist's controller) makes the directory and removes it at exit; xdist's workers
# inherit its name. A compiled program read back is the same executable (its HLO text, cost and memory
# analyses included). In memory where the machine has a tmpfs (/dev/shm): every compile writes an entry,
# and a disk's writes cost the suite about 5%. GRADTX_TEST_NO_JAX_CACHE=1 compiles everything afresh.
if not os.environ.get("GRADTX_TEST_NO_JAX_CACHE"):
    _cache = os.environ.get("GRADTX_TEST_JAX_CACHE")
    if _cache is None:
        _memory = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _cache = tempfile.mkdtemp(prefix="gradtx-test-jax-cache-", dir=_memory)
        os.environ["GRADTX_TEST_JAX_CACHE"] = _cache
        atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
jax.devices()  # the backend starts here, reading XLA_FLAGS; subprocesses get the user's flags back

if not os.environ.get("GRADTX_TEST_FRESH_MLIR_CONTEXTS"):
    from tests import mlir_contexts

    mlir_contexts.reuse()


def _restore_flags():
    if _flags is None:
        os.environ.pop("XLA_FLAGS", None)
    else:
        os.environ["XLA_FLAGS"] = _flags


_restore_flags()

# The longest items first: pytest-xdist deals the first items out alternately, so `make test`'s two workers
# share them and finish together, instead of one running a notebook while the other has nothing left.
LONGEST = (
    "notebooks/",
    "tests/test_sharding_matrix.py",
    "tests/test_benchmarks.py::test_smoke",
    "tests/test_explicit_mode.py::test_every_entry_steps",
    "tests/parallel/test_multihost_checkpoint.py",
    "tests/test_demo.py",
    "tests/parallel/test_multiprocess.py",
)


def pytest_collection_modifyitems(items):
    def rank(item):
        return next((i for i, prefix in enumerate(LONGEST) if item.nodeid.startswith(prefix)), len(LONGEST))

    items.sort(key=rank)  # stable: the rest keep their order


NOTEBOOKS_WITH_XLA_DEFAULTS = ("06_packed_parameters.ipynb",)
"""Notebooks whose claims are about the compiled programs' numbers (06: packed and leaf-by-leaf training
agree to 1e-4, which holds with XLA's fusions and not without them)."""


class _NotebookFlags:
    """Each notebook's kernel starts with the environment of the moment: give it the fast compile flags.

    A plugin, not a hook of this file: a conftest's test-running hooks apply only to the tests below it.
    """

    def pytest_runtest_setup(self, item):
        if item.nodeid.startswith("notebooks/") and item.path.name not in NOTEBOOKS_WITH_XLA_DEFAULTS:
            if fast_xla.wanted():
                os.environ["XLA_FLAGS"] = fast_xla.xla_flags(_flags)

    def pytest_runtest_teardown(self, item):
        if item.nodeid.startswith("notebooks/"):
            _restore_flags()


def pytest_configure(config):
    config.pluginmanager.register(_NotebookFlags(), "gradtx-notebook-flags")


_RETURNN_PROXIES = {
    ("returnn.__old_mod_loader__", "_LazyLoader"),  # `returnn.TFUtil` and the other old module names
    ("returnn.config", "_GlobalConfigAsPyModuleProxy"),  # a `Config` made available as a module
}
_modules_seen = 0


def pytest_runtest_setup(item):
    """Drop RETURNN's proxy modules from `sys.modules` (once RETURNN is in, whenever a module was added).

    Code that walks `sys.modules` and reads an attribute of each (unittest's `assertWarns` resets every
    module's `__warningregistry__`; optax's suite calls it) would make them load `returnn.tf` (the old names,
    or the global config, which looks for TF's default graph), and that switches TensorFlow to graph mode
    for the rest of the worker: the eager TF parity tests then fail.
    """
    global _modules_seen
    if "returnn" not in sys.modules or len(sys.modules) == _modules_seen:
        return
    for name, module in list(sys.modules.items()):
        if (type(module).__module__, type(module).__name__) in _RETURNN_PROXIES:
            del sys.modules[name]
    _modules_seen = len(sys.modules)
