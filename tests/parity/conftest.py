"""TensorFlow is the oracle here. Without it these tests skip, unless GRADTX_REQUIRE_TF=1 (set by `make
test`)."""

import os

import pytest

try:
    import tensorflow  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the environment
    if os.environ.get("GRADTX_REQUIRE_TF") == "1":
        raise RuntimeError("GRADTX_REQUIRE_TF=1 but TensorFlow cannot be imported; run `make test`.") from err
    collect_ignore_glob = ["test_*.py"]


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.parity)
