"""Check the internal links of a built HTML site (`make docs` runs it over docs/_build/html).

Usage: `python tools/check_links.py docs/_build/html` prints every broken link as
`page: link (why)` and exits 1, or prints a one-line summary and exits 0.

Every `.html` file under the site's root is parsed; every `href` and `src` (and `srcset`)
that does not name a scheme (`http:`, `https:`, `mailto:`, `data:`, ...) or a host (`//...`)
is internal and is resolved against its page: the file must exist inside the root (a link
ending in `/` means its `index.html`), and a `#fragment` must be an `id` (or an `<a name>`)
of the target page (the same page when the link is only `#fragment`). Fragments into
non-HTML files and an empty `#` are not checked. Standard library only; no Sphinx needed.
"""

from __future__ import annotations

import argparse
import html.parser
import pathlib
import sys
import urllib.parse
from typing import NamedTuple

LINK_ATTRIBUTES = frozenset({"href", "src", "srcset"})


class Broken(NamedTuple):
    page: str  # relative to the root, `/`-separated
    link: str  # as written in the page
    why: str

    def __str__(self) -> str:
        return f"{self.page}: {self.link} ({self.why})"


class _Page(html.parser.HTMLParser):
    """Collects a page's link targets and the fragment ids it defines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (name == "name" and tag == "a"):
                self.ids.add(value)
            elif name == "srcset":
                self.links.extend(part.split()[0] for part in value.split(",") if part.strip())
            elif name in LINK_ATTRIBUTES:
                self.links.append(value)

    handle_startendtag = handle_starttag


def _is_external(link: str) -> bool:
    parts = urllib.parse.urlsplit(link)
    return bool(parts.scheme) or link.startswith("//")


def check(root: pathlib.Path) -> tuple[list[Broken], int, int]:
    """Returns (the broken internal links, the number of pages, the number of internal links)."""
    root = root.resolve()
    pages: dict[pathlib.Path, _Page] = {}
    for path in sorted(root.rglob("*.html")):
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        page.close()
        pages[path] = page

    def ids_of(path: pathlib.Path) -> set[str] | None:
        if path not in pages:
            return None
        return pages[path].ids

    broken: list[Broken] = []
    n_links = 0
    for path, page in pages.items():
        name = path.relative_to(root).as_posix()
        for link in page.links:
            link = link.strip()
            if not link or _is_external(link):
                continue
            n_links += 1
            parts = urllib.parse.urlsplit(link)
            fragment = urllib.parse.unquote(parts.fragment)
            if parts.path:
                target = (path.parent / urllib.parse.unquote(parts.path)).resolve()
                if parts.path.endswith("/") or target.is_dir():
                    target = target / "index.html"
            else:
                target = path
            if target != root and root not in target.parents:
                broken.append(Broken(name, link, "points outside the site"))
                continue
            if not target.is_file():
                broken.append(Broken(name, link, f"no file {target.relative_to(root).as_posix()}"))
                continue
            if fragment and target.suffix == ".html":
                ids = ids_of(target)
                if ids is not None and fragment not in ids:
                    where = "this page" if target == path else target.relative_to(root).as_posix()
                    broken.append(Broken(name, link, f"no id {fragment!r} on {where}"))
    return broken, len(pages), n_links


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path, help="the built site, e.g. docs/_build/html")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"check_links: {args.root} is not a directory (build the site first: make docs)")
        return 2
    broken, n_pages, n_links = check(args.root)
    for item in broken:
        print(item)
    if broken:
        print(f"check_links: {len(broken)} broken internal link(s) in {args.root}")
        return 1
    print(f"check_links: {n_links} internal links on {n_pages} pages, none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main())
