"""Render the "From optax" guide's name table: every optimizer-facing optax name and its gradtx call.

Usage: `python tools/optax_table.py` prints the table; `--write` replaces it in
docs/guides/from-optax.md (between the `optax-table:start` / `optax-table:end` markers).
tests/optax_compat/test_optax_table.py fails when the guide's table differs from this output.

A row per public name of `optax` and `optax.schedules` (losses and submodules left out): the
`gradtx.optax_compat` name that gives optax's numbers (tested against optax in
tests/optax_compat/), whether the top-level gradtx name of the same spelling has optax's numbers
(TF-named ones say on their docstring's first line where they do not), or "not yet".
"""

from __future__ import annotations

import inspect
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "from-optax.md"
START, END = "<!-- optax-table:start -->", "<!-- optax-table:end -->"

ELSEWHERE = {
    "multi_transform": "`gradtx.partition`",
    "MultiTransformState": "`gradtx.partition`'s state",
    "flatten": "`gradtx.packing.packed(tx)` (state in a few buffers; `pack` for packed parameters)",
    "tree_map_params": "`gradtx.optax_compat.tree.map_params`, the same function",
}
"""optax names whose counterpart has another gradtx name (not in `optax_compat` yet)."""


def _names() -> list[str]:
    import optax

    losses = set(dir(optax.losses))
    out = set()
    for module in (optax, optax.schedules):
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or isinstance(obj, types.ModuleType) or name in losses:
                continue
            out.add(name)
    return sorted(out, key=str.lower)


def _gradtx_column(name: str) -> str:
    import gradtx

    obj = getattr(gradtx, name, None)
    if obj is None or inspect.ismodule(obj):
        return ""
    first = ((inspect.getdoc(obj) or "").splitlines() or [""])[0]
    return "no (see above)" if f"not `optax.{name}`" in first else "yes"


def render() -> str:
    import gradtx.optax_compat as compat

    rows = ["| optax | `gradtx.optax_compat` | `gradtx.<same name>` has optax's numbers |", "|---|---|---|"]
    for name in _names():
        if name in compat.__all__:
            rows.append(f"| `optax.{name}` | `{name}` | {_gradtx_column(name) or '-'} |")
        else:
            rows.append(
                f"| `optax.{name}` | not yet{f' (see {ELSEWHERE[name]})' if name in ELSEWHERE else ''} | - |"
            )
    covered = sum(1 for n in _names() if n in compat.__all__)
    return f"{covered} of {len(_names())} names.\n\n" + "\n".join(rows)


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
