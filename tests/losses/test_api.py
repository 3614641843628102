"""gradtx.losses has optax.losses' names, signatures and top-level bindings, and does not import optax."""

from __future__ import annotations

import ast
import inspect
import pathlib

import pytest

from gradtx import losses

optax = pytest.importorskip("optax")

OPTAX_NAMES = sorted(n for n in dir(optax.losses) if not n.startswith("_"))


def test_all_is_sorted_and_covers_optax_losses():
    assert losses.__all__ == sorted(losses.__all__)
    assert set(losses.__all__) == set(OPTAX_NAMES)
    assert all(callable(getattr(losses, name)) for name in losses.__all__)


def test_optax_top_level_names_are_the_losses_optax_binds_at_its_top():
    top = {n for n in OPTAX_NAMES if getattr(optax, n, None) is getattr(optax.losses, n)}
    assert set(losses.OPTAX_TOP_LEVEL) == top
    assert list(losses.OPTAX_TOP_LEVEL) == sorted(losses.OPTAX_TOP_LEVEL)
    for name in losses.OPTAX_TOP_LEVEL:
        assert name in losses.__doc__


def _params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", OPTAX_NAMES)
def test_signature_is_optax(name):
    assert _params(getattr(losses, name)) == _params(getattr(optax.losses, name))


def test_fenchel_young_loss_signature_is_optax():
    ours = losses.make_fenchel_young_loss(max)
    theirs = optax.losses.make_fenchel_young_loss(max)
    assert _params(ours) == _params(theirs)


def test_gradtx_losses_does_not_import_optax():
    for path in pathlib.Path(losses.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "optax" for a in node.names), path
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] != "optax", path
