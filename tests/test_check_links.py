"""tools/check_links.py (`make docs` runs it over the built site), on a tiny fake site."""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import check_links  # noqa: E402


def _site(tmp_path: pathlib.Path, pages: dict[str, str]) -> pathlib.Path:
    for name, body in pages.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<!DOCTYPE html><html><body>{body}</body></html>")
    return tmp_path / "site"


GOOD = {
    "index.html": (
        '<h1 id="top">Top</h1><a href="#top">self</a><a href="#">empty</a>'
        '<a href="guides/a.html#sec-1">a guide</a><a href="guides/">folder</a>'
        '<a href="guides/a.html?x=1">query</a><img src="_static/logo.png">'
        '<img srcset="_static/logo.png 1x, _static/logo.png 2x">'
        '<a href="https://example.com/missing.html">external</a><a href="mailto:a@b.c">mail</a>'
        '<a href="//cdn.example.com/x.js">protocol-relative</a><script src="data:text/javascript,1"></script>'
        '<a href="dl/file.txt#L3">fragment into a non-HTML file</a>'
    ),
    "guides/a.html": '<section id="sec-1"><a name="old"></a><a href="../index.html#top">up</a></section>',
    "guides/index.html": '<a href="a.html#old">named anchor</a><a href="a%2Ehtml">escaped</a>',
    "_static/logo.png": "",
    "dl/file.txt": "",
}


def test_a_site_without_broken_links_passes(tmp_path, capsys):
    site = _site(tmp_path, GOOD)
    broken, n_pages, n_links = check_links.check(site)
    assert broken == []
    assert n_pages == 3 and n_links == 12
    assert check_links.main([str(site)]) == 0
    assert "none broken" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("link", "why"),
    [
        ("guides/b.html", "no file guides/b.html"),
        ("guides/a.html#nope", "no id 'nope' on guides/a.html"),
        ("#nope", "no id 'nope' on this page"),
        ("../outside.html", "points outside the site"),
        ("missing/", "no file missing/index.html"),
    ],
)
def test_each_kind_of_broken_link_is_reported(tmp_path, capsys, link, why):
    site = _site(tmp_path, {**GOOD, "extra.html": f'<p id="p"><a href="{link}">bad</a></p>'})
    broken, _, _ = check_links.check(site)
    assert broken == [check_links.Broken("extra.html", link, why)]
    assert check_links.main([str(site)]) == 1
    out = capsys.readouterr().out
    assert f"extra.html: {link} ({why})" in out and "1 broken internal link" in out


def test_a_missing_site_is_an_error(tmp_path):
    assert check_links.main([str(tmp_path / "nothing")]) == 2
