"""Render the "From optax" guide's name table: every optimizer-facing optax name and its gradtx call.

Usage: `python tools/optax_table.py` prints the table; `--write` replaces it in
docs/guides/from-optax.md (between the `optax-table:start` / `optax-table:end` markers).
tests/optax_compat/test_optax_table.py fails when the guide's table differs from this output.

A row per public name of optax's public modules (`optax` and `optax.contrib`, `.schedules`,
`.transforms`, `.tree`, `.tree_utils`, `.losses`, `.second_order`, `.projections`, `.assignment`,
`.microbatching`, `.experimental.aggregating`, `.perturbations`): the `gradtx.optax_compat` name
that gives optax's numbers
(tested against optax in tests/optax_compat/ and beside each optimizer's tests), whether the
top-level gradtx name of the same spelling has optax's numbers (TF-named ones say on their
docstring's first line where they do not), "out of scope" with the reason, or "not yet".
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import sys
import types
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "from-optax.md"
START, END = "<!-- optax-table:start -->", "<!-- optax-table:end -->"

MODULES = (
    "",
    "contrib",
    "schedules",
    "transforms",
    "tree",
    "tree_utils",
    "losses",
    "second_order",
    "projections",
    "assignment",
    "microbatching",
    "experimental.aggregating",
    "perturbations",
)
"""optax's public modules ("": the top level); tests/optax_compat/test_module_walk.py walks them all."""

ELSEWHERE: dict[str, str] = {}
"""optax names whose counterpart has another gradtx name (not in `optax_compat` under optax's)."""


def _out_of_scope(full: str) -> str | None:
    """Why gradtx does not offer `optax.<full>` (from `optax_compat`'s own list), or None."""
    from gradtx.optax_compat._mirror import OUT_OF_SCOPE

    return OUT_OF_SCOPE.get(full) or OUT_OF_SCOPE.get(full.split(".", 1)[0])


def _imported_type(name: str, obj: Any) -> bool:
    """Whether `obj` is `typing`'s or `collections.abc`'s name that an optax module imported (`Any`)."""
    import collections.abc
    import typing

    return any(obj is getattr(m, name, None) for m in (typing, collections.abc))


def _module(name: str) -> Any:
    import optax

    module = optax
    for part in name.split(".") if name else []:  # `optax.experimental.aggregating` is an attribute only
        module = getattr(module, part, None) or importlib.import_module(f"{module.__name__}.{part}")
    return module


def _names() -> list[tuple[str, str]]:
    """`(module, name)` for every optimizer-facing optax name, sorted by module then name."""
    out = []
    for module in MODULES:
        names = set()
        for name in dir(_module(module)):
            obj = getattr(_module(module), name)
            if name.startswith("_") or isinstance(obj, types.ModuleType) or _imported_type(name, obj):
                continue
            names.add(name)
        out += [(module, n) for n in sorted(names, key=str.lower)]
    return out


def _compat(module: str, name: str) -> Any:
    """The `gradtx.optax_compat` object for `optax.<module>.<name>`, or None."""
    import gradtx.optax_compat as compat

    where: Any = compat
    for part in module.split(".") if module else []:
        where = getattr(where, part, None)
        if where is None:
            return None
    public = getattr(where, "__all__", None)
    return getattr(where, name, None) if public is None or name in public else None


def _gradtx_column(name: str) -> str:
    import gradtx

    obj = getattr(gradtx, name, None)
    if obj is None or inspect.ismodule(obj):
        return ""
    first = ((inspect.getdoc(obj) or "").splitlines() or [""])[0]
    return "no (see above)" if f"not `optax.{name}`" in first else "yes"


def _qualified(module: str, name: str) -> str:
    return f"{module}.{name}" if module else name


def render() -> str:
    rows = ["| optax | `gradtx.optax_compat` | `gradtx.<same name>` has optax's numbers |", "|---|---|---|"]
    covered = out_of_scope = 0
    names = _names()
    for module, name in names:
        full = _qualified(module, name)
        if _compat(module, name) is not None:
            covered += 1
            gradtx_column = _gradtx_column(name) if module in ("", "contrib", "transforms") else ""
            rows.append(f"| `optax.{full}` | `{full}` | {gradtx_column or '-'} |")
        elif _out_of_scope(full):
            out_of_scope += 1
            rows.append(f"| `optax.{full}` | out of scope: {_out_of_scope(full)} | - |")
        else:
            elsewhere = f" (see {ELSEWHERE[full]})" if full in ELSEWHERE else ""
            rows.append(f"| `optax.{full}` | not yet{elsewhere} | - |")
    summary = (
        f"{covered} of {len(names)} names covered, {out_of_scope} out of scope, "
        f"{len(names) - covered - out_of_scope} not yet."
    )
    return summary + "\n\n" + "\n".join(rows)


def main(argv: list[str]) -> None:
    table = render()
    if "--write" not in argv:
        print(table)
        return
    text = GUIDE.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    GUIDE.write_text(f"{head}{START}\n{table}\n{END}{tail}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(sys.argv[1:])
