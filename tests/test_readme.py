"""The README and the guides keep true: the catalogue table of docs/guides/from-tf1.md is what
tools/catalog_table.py generates from the package and tests, the README's example runs, and the README
links every guide.

The guides' own Python blocks run in tests/test_guides.py (the data-parallel step of on-a-pod.md on 8
devices, the packed step of many-small-leaves.md, the quickstart of getting-started.md, each with its
checks).
"""

import importlib.util
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDES = ROOT / "docs" / "guides"


def _tool():
    spec = importlib.util.spec_from_file_location("catalog_table", ROOT / "tools" / "catalog_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_catalogue_table_is_current():
    tool = _tool()
    assert tool.TARGET == GUIDES / "from-tf1.md"
    text = tool.TARGET.read_text()
    assert tool.START in text and tool.END in text
    assert text == tool.with_table(text), (
        "the catalogue table of docs/guides/from-tf1.md is stale: run `python tools/catalog_table.py --write`"
    )


def test_every_registered_optimizer_has_a_catalogue_row():
    from gradtx import registry

    tool = _tool()
    rows = {path for _, _, path, _ in tool.ROWS}
    assert sorted(set(registry.names("optimizer")) - rows) == []


def test_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    code = text.split("## Ten lines", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 12
    namespace: dict = {}
    exec(compile(code, "README example", "exec"), namespace)  # noqa: S102 -- our own docs
    w = namespace["params"]["w"]
    assert abs(float(w[0]) - 1.0) < 1e-2 and abs(float(w[2]) - 3.0) < 1e-2


def test_readme_is_a_landing_page_that_links_every_guide():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for guide in sorted(GUIDES.glob("*.md")):
        assert f"(docs/guides/{guide.name})" in text, f"README does not link {guide.name}"
    assert "make demo" in text and "make test" in text and "make docs" in text


def test_relative_links_in_readme_and_guides_resolve():
    """Every relative Markdown link of the README and the guides names a file that exists (anchors aside)."""
    for page in [ROOT / "README.md", *sorted(GUIDES.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert path.exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"
