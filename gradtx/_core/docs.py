"""Docstring sections a family of functions shares, written once (STYLE.md: identical wording wherever a
name recurs).

A docstring holds `{NAME}` on a line of its own where a shared section goes (`{ADAM_ARGS}` in an
`Args:` block, `{RETURNS_TREE}` for a whole `Returns:` section); `sections(NAME=text)` fills it, the
text's lines indented as the placeholder is. `help()`, Sphinx and the doctests see the whole text.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def fill(doc: str, texts: dict[str, str]) -> str:
    """`doc` with each line `{NAME}` (any indentation) replaced by `texts[NAME]`, indented alike."""

    def replace(match: re.Match[str]) -> str:
        indent, name = match.group(1), match.group(2)
        if name not in texts:
            return match.group(0)
        lines = inspect.cleandoc(texts[name]).splitlines()
        return "\n".join(indent + line if line else "" for line in lines)

    return re.sub(r"(?m)^([ \t]*)\{([A-Z][A-Z0-9_]*)\}$", replace, doc)


def sections(**texts: str) -> Callable[[F], F]:
    """Decorator: fill the docstring's `{NAME}` lines from `texts` (see the module doc)."""

    def decorate(fn: F) -> F:
        fn.__doc__ = fill(fn.__doc__ or "", texts)
        return fn

    return decorate


def args_section(doc: str) -> dict[str, str]:
    """`{name: description}` of a Google-style docstring's `Args:` (continuation lines joined)."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(doc or "").splitlines()
    if "Args:" not in lines:
        return out
    current = None
    for line in lines[lines.index("Args:") + 1 :]:
        if not line.strip():
            continue
        if not line.startswith("  "):
            break
        m = re.match(r"^  (\*{0,2}\w+): (.*)$", line)
        if m and not line.startswith("    "):
            current = m.group(1)
            out[current] = m.group(2)
        elif current is not None:
            out[current] += " " + line.strip()
    return out
