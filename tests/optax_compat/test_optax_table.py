"""The "From optax" guide's name table is what tools/optax_table.py renders from the package and optax."""

from __future__ import annotations

import pathlib
import sys

import pytest

pytest.importorskip("optax")

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import optax_table  # noqa: E402


def test_the_guide_table_is_current():
    text = optax_table.GUIDE.read_text()
    current = text.split(optax_table.START, 1)[1].split(optax_table.END, 1)[0].strip()
    assert current == optax_table.render().strip(), "run `python tools/optax_table.py --write`"


def test_every_compat_name_is_an_optax_name():
    import optax

    import gradtx.optax_compat as compat

    extra = [n for n in compat.__all__ if not hasattr(optax, n) and n != "schedules"]
    assert extra == [], extra
