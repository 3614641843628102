"""Screenshots of the built site at 1,400 px wide, to see that tables, code and plots fit.

Usage (after `make docs`):

    python tools/screenshots.py OUT_DIR [--site docs/_build/html] [--width 1400] [--height 1000]

writes one PNG per page into OUT_DIR (the images are not committed): the index, an API page, the
optax_compat page, the RETURNN key table (guides/from-returnn.html#every-key), a guide and a
notebook page. Each is the browser window at that width, at the page's anchor, if any (scrolled
there; a browser without playwright gets a copy of the page with that section moved to the top).

The browser: headless Chromium through playwright when it is installed (`pip install playwright`,
then `playwright install chromium`, which downloads a browser build; playwright is not a
dependency of gradtx), else a Chromium or Chrome found on PATH (playwright can drive that one too,
or, without playwright, its own `--headless --screenshot`). Without either it says so and exits
with status 2. With playwright it also reports what does not fit: the page scrolling sideways,
and each table or code block wider than its box (those scroll inside the column by design:
docs/_static/gradtx.css).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]

PAGES = (
    ("index", "index.html"),
    ("api-transforms", "api/transforms.html"),
    ("api-optax-compat", "api/optax_compat.html"),
    ("returnn-key-table", "guides/from-returnn.html#every-key"),
    ("guide-getting-started", "guides/getting-started.html"),
    ("notebook-data-parallel", "notebooks/04_data_parallel.html#summary"),
)
"""(file name, page and anchor): what is photographed."""

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

_OVERFLOW_JS = """
() => {
  const out = {page: document.documentElement.scrollWidth > window.innerWidth + 1, wide: []};
  for (const el of document.querySelectorAll("article table, article pre, article img")) {
    const box = el.getBoundingClientRect();
    const column = el.closest("article").getBoundingClientRect();
    const holder = el.parentElement;
    const scrolls = el.scrollWidth > el.clientWidth + 1 || holder.scrollWidth > holder.clientWidth + 1;
    const cut = !scrolls && box.right > column.right + 1;
    if (cut || scrolls) {
      const text = (el.innerText || el.getAttribute("alt") || "").trim().slice(0, 60);
      out.wide.push({tag: el.tagName.toLowerCase(), cut: cut, scrolls: scrolls, text: text});
    }
  }
  return out;
}
"""


def _system_browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def _sandbox_args() -> list[str]:
    # Chromium refuses to start as root with its sandbox on (containers, CI)
    return ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []


def _with_playwright(
    site: pathlib.Path, out: pathlib.Path, width: int, height: int, browser_path: str | None
) -> list[str]:
    from playwright.sync_api import Error, sync_playwright

    notes = []
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(args=_sandbox_args())
        except Error:
            if browser_path is None:
                raise
            browser = p.chromium.launch(executable_path=browser_path, args=_sandbox_args())
        page = browser.new_page(viewport={"width": width, "height": height})
        for name, where in PAGES:
            path, _, anchor = where.partition("#")
            url = (site / path).as_uri() + (f"#{anchor}" if anchor else "")
            page.goto(url, wait_until="load")
            page.wait_for_timeout(300)  # fonts, MathJax
            if anchor:  # at once, not furo's smooth scrolling, which a screenshot would catch midway
                page.evaluate(
                    f"document.documentElement.style.scrollBehavior = 'auto';"
                    f"document.getElementById({anchor!r})?.scrollIntoView({{block: 'start'}})"
                )
                page.wait_for_timeout(300)
            page.screenshot(path=str(out / f"{name}.png"))
            report: Any = page.evaluate(_OVERFLOW_JS)
            if report["page"]:
                notes.append(f"{name}: the page scrolls sideways at {width} px")
            for el in report["wide"]:
                how = "cut off" if el["cut"] else "scrolls inside its box"
                notes.append(f"{name}: a {el['tag']} {how} ({el['text']!r})")
        browser.close()
    return notes


def _anchored_copy(page: pathlib.Path, anchor: str, folder: pathlib.Path) -> pathlib.Path:
    """A copy of `page` that shows the section `anchor` first: Chromium's --screenshot takes the top of
    the page whatever its URL's fragment or a script's scrolling, so the section is moved to the top
    of the article. In `folder`, its links resolved against the page's own folder (`<base>`)."""
    html = page.read_text(encoding="utf-8")
    base = f'<base href="{page.parent.as_uri()}/">'
    script = (
        "<script>document.addEventListener('DOMContentLoaded', () => {"
        f"const target = document.getElementById({anchor!r});"
        "const section = target?.closest('section') ?? target;"
        "section?.closest('article')?.prepend(section);});</script>"
    )
    copy = folder / page.name
    copy.write_text(html.replace("<head>", f"<head>{base}", 1).replace("</body>", f"{script}</body>", 1))
    return copy


def _with_cli(site: pathlib.Path, out: pathlib.Path, width: int, height: int, browser: str) -> None:
    for name, where in PAGES:
        path, _, anchor = where.partition("#")
        with tempfile.TemporaryDirectory() as scratch:
            page = site / path
            url = (_anchored_copy(page, anchor, pathlib.Path(scratch)) if anchor else page).as_uri()
            subprocess.run(
                [
                    browser,
                    "--headless",
                    *_sandbox_args(),
                    "--disable-gpu",
                    "--hide-scrollbars",
                    f"--user-data-dir={scratch}/profile",
                    f"--window-size={width},{height}",
                    "--virtual-time-budget=3000",  # scripts run (MathJax, the copy's) before the shot
                    f"--screenshot={(out / f'{name}.png').resolve()}",
                    url,
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path, help="the folder the PNG files go to")
    parser.add_argument("--site", type=pathlib.Path, default=ROOT / "docs" / "_build" / "html")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args(argv)
    site = args.site.resolve()
    missing = [where for _, where in PAGES if not (site / where.partition("#")[0]).is_file()]
    if missing:
        print(f"screenshots: {site} lacks {', '.join(missing)}: build the site first (make docs).")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    browser = _system_browser()
    try:
        import playwright  # noqa: F401
    except ImportError:
        playwright_found = False
    else:
        playwright_found = True
    if playwright_found:
        notes = _with_playwright(site, args.out, args.width, args.height, browser)
        print(f"screenshots: {len(PAGES)} pages at {args.width} px into {args.out}")
        for note in notes:
            print(f"  {note}")
        return 0
    if browser is not None:
        _with_cli(site, args.out, args.width, args.height, browser)
        print(f"screenshots: {len(PAGES)} pages at {args.width} px into {args.out} ({browser})")
        return 0
    print(
        "screenshots: no browser found. Install playwright and its Chromium "
        "(`pip install playwright && playwright install chromium`), or a Chromium or Chrome "
        f"on PATH (one of {', '.join(BROWSERS)})."
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
