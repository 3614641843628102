"""Render the "From RETURNN" guide's key table: every RETURNN config key gradtx knows, per backend.

Usage: `python tools/returnn_keys_table.py` prints the table; `--write` replaces it in
docs/guides/from-returnn.md (between the `returnn-keys:start` / `returnn-keys:end` markers).
tests/returnn/test_keys_table.py fails when the guide's table differs from this output.

One row per key of `gradtx.returnn._keys.KEYS`, grouped by what gradtx does with it under the
TensorFlow backend then the PyTorch one: applied (its numbers tested), refused (with what to do),
ignored (it does not change the update). Keys a config holds that are not here (datasets, the network,
model settings) are accepted without a row, as RETURNN accepts them.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "from-returnn.md"
START, END = "<!-- returnn-keys:start -->", "<!-- returnn-keys:end -->"
ORDER = {"applied": 0, "refused": 1, "ignored": 2}


def _cell(kind: str, note: str) -> str:
    text = f"**{kind}**" + (f": {note}" if note else "")
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    from gradtx.returnn._keys import KEYS

    def sort_key(name: str) -> tuple:
        key = KEYS[name]
        return (min(ORDER[key.on(b)[0]] for b in ("tf", "torch")), name)

    lines = ["| key | TensorFlow backend | PyTorch backend |", "|---|---|---|"]
    for name in sorted(KEYS, key=sort_key):
        key = KEYS[name]
        tf, torch = (_cell(*key.on(b)) for b in ("tf", "torch"))
        lines.append(f"| `{name}` | {tf} | {torch} |")
    return "\n".join(lines)


def guide_with_table(text: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{render()}\n{END}{tail}"


def main(argv: list[str]) -> None:
    if "--write" in argv:
        GUIDE.write_text(guide_with_table(GUIDE.read_text()))
    else:
        print(render())


if __name__ == "__main__":
    main(sys.argv[1:])
