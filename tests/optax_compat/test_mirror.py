"""gradtx/optax_compat/_mirror.py: the generated signatures are current, and the functions it builds read
as optax's (name, module, signature, a docstring whose every argument is described)."""

from __future__ import annotations

import inspect
import pathlib
import sys
import types

import pytest

optax = pytest.importorskip("optax")

import gradtx.optax_compat as compat  # noqa: E402
from gradtx.optax_compat import _mirror  # noqa: E402
from gradtx.optax_compat._signatures import SIGNATURES  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import optax_signatures  # noqa: E402


def _mirrored(path):
    module, _, name = path.rpartition(".")
    owner = compat if not module else getattr(compat, module.split(".")[0])
    return getattr(owner, name, None)


def test_the_signature_file_is_generated_from_the_installed_optax():
    assert optax_signatures.TARGET.read_text() == optax_signatures.render(), (
        "run `python tools/optax_signatures.py --write`"
    )


def test_every_table_entry_has_a_signature_and_nothing_else_does():
    assert set(SIGNATURES) == optax_signatures.mirrored()


@pytest.mark.parametrize("path", sorted(p for p in SIGNATURES if "._" not in p))
def test_each_function_reads_as_optax_s(path):
    fn = _mirrored(path)
    assert fn is not None, path
    assert fn.__name__ == path.rsplit(".", 1)[-1] and fn.__module__ == _mirror.MODULE
    theirs = inspect.signature(optax_signatures.optax_object(path))
    assert list(inspect.signature(fn).parameters) == list(theirs.parameters)
    doc = inspect.getdoc(fn)
    for name in theirs.parameters:
        assert f"\n  {name}: " in doc or f"\n  *{name}: " in doc, f"{path}: `{name}` is not described"


def test_forward_passes_the_arguments_a_block_takes():
    def block(b1, eps=0.0, *, nesterov=False):
        return (b1, eps, nesterov)

    a = types.SimpleNamespace(learning_rate=0.1, b1=0.9, eps=1e-8, nesterov=True, mask=None)
    assert _mirror.forward(block, a) == (0.9, 1e-8, True)
    assert _mirror.forward(block, a, eps=0.5) == (0.9, 0.5, True)


def test_a_missing_name_says_where():
    with pytest.raises(AttributeError, match=r"^`gradtx.optax_compat.contrib` has no `nope`"):
        compat.contrib.nope  # noqa: B018
