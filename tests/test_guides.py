"""The guides in docs/guides and the site's index page run: each ```python block on its own.

Every block runs in a fresh namespace, as a reader who copies that one block into a new program would
run it. A block that goes on from the one before it says so on its first line:

    # continues the previous example

and then runs in the namespace the previous block left (a run of such blocks shares one namespace).
Blocks fenced as ```py (or any other language) are shown, not run.

A guide that registers a factory does so in a copy of the registry (and of the test catalogue), taken
afresh for each block that does not continue, so the rest of the suite sees the built-in catalogue only.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from gradtx._core import registry
from tests.catalog import _entries as catalog_rows

DOCS = pathlib.Path(__file__).parent.parent / "docs"
GUIDES = sorted(DOCS.joinpath("guides").glob("*.md")) + [DOCS / "index.md"]


CONTINUES = "# continues the previous example"
"""The first line of a block that runs in the namespace of the block before it."""


def _blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("path", GUIDES, ids=[p.stem for p in GUIDES])
def test_guide_runs(path, monkeypatch):
    blocks = _blocks(path)
    assert blocks, f"{path.name} has no Python block"
    assert not blocks[0].startswith(CONTINUES), f"{path.name}: its first block has no example to continue"
    built_in = dict(registry._ENTRIES), dict(registry._LOOKUP), dict(catalog_rows.ROWS)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        if i == 0 or not (block.startswith(CONTINUES)):  # a fresh program
            monkeypatch.setattr(registry, "_ENTRIES", dict(built_in[0]))
            monkeypatch.setattr(registry, "_LOOKUP", dict(built_in[1]))
            monkeypatch.setattr(catalog_rows, "ROWS", dict(built_in[2]))
            namespace = {"__name__": f"guide_{path.stem.replace('-', '_')}_{i}"}
        exec(compile(block, f"{path.name}[block {i}]", "exec"), namespace)  # noqa: S102 -- our own docs


def test_adding_an_optimizer_takes_about_thirty_lines():
    """The module (rule, optimizer, registry entries), the test and its catalogue row: code lines (no blank
    lines, no comments)."""
    blocks = _blocks(pathlib.Path(__file__).parent.parent / "docs" / "guides" / "adding-an-optimizer.md")
    code = [
        line for b in blocks for line in b.splitlines() if line.strip() and not line.strip().startswith("#")
    ]
    assert len(code) <= 60, len(code)
    formula = [line for line in blocks[0].splitlines() if line.startswith("    ") and "h." in line]
    assert len(formula) == 2  # the moment and the step


def test_beyond_optax_lists_every_optimizer_with_a_pytorch_reference():
    """The "Beyond optax" guide's table names each optimizer that takes a PyTorch class's arguments, with
    that class."""
    import gradtx

    text = (DOCS / "guides" / "beyond-optax.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for e in gradtx.registry.entries():
        if e.reference is None:
            continue
        row = next((r for r in rows if f"`{e.name}`" in r.split("|")[1]), None)
        assert row is not None, f"{e.name} is not in beyond-optax.md's table"
        assert e.reference.class_name in row.split("|")[2], (e.name, e.reference.path, row)
