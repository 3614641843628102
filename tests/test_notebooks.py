"""The notebooks: all present, linked from the READMEs, committed without outputs.

`make test` executes them (pytest `--nbmake`); this file checks what execution cannot.
"""

from __future__ import annotations

import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = (
    "01_quickstart.ipynb",
    "02_optimizer_gallery.ipynb",
    "03_from_tf1.ipynb",
    "04_data_parallel.ipynb",
    "05_sparse_embeddings.ipynb",
    "06_packed_parameters.ipynb",
    "07_the_rest_of_optax.ipynb",
    "08_beyond_optax.ipynb",
)


def test_the_notebooks_are_the_documented_ones():
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")) == sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_committed_without_outputs(name):
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a notebook without code"
    for i, cell in enumerate(code):
        assert cell.get("outputs") == [], f"{name}: code cell {i} has outputs"
        assert cell.get("execution_count") is None, f"{name}: code cell {i} has an execution count"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert nb["cells"][0]["cell_type"] == "markdown" and "".join(nb["cells"][0]["source"]).startswith("# ")


@pytest.mark.parametrize("readme", ["README.md", "notebooks/README.md"])
def test_readmes_link_every_notebook(readme):
    text = (ROOT / readme).read_text()
    for name in NOTEBOOKS:
        assert name in text, f"{readme} does not link {name}"
