"""Try `gradtx.from_returnn_config` on every RETURNN config file of some checkouts, as a RETURNN user would.

    git clone https://github.com/rwth-i6/returnn-experiments /tmp/rx
    git clone https://github.com/rwth-i6/returnn /tmp/returnn
    python tools/returnn_corpus.py /tmp/rx /tmp/returnn

Every `*.config` file under the given directories is built with the defaults (no argument but the
path), and tallied: built (with the warnings of keys RETURNN runs without), refused by the first key
the refusal names, or not a RETURNN config (a RASR / Sprint config, whose files share the suffix).
The "From RETURNN" guide shows the tally of both repositories. The files themselves are not copied
into this repository: returnn-experiments carries no licence, and RETURNN's own forbids commercial use.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import sys
import warnings

import gradtx
from gradtx import returnn

RASR = "section header of a RASR"


def outcome(path: pathlib.Path) -> tuple[str, str, list[str]]:
    """`(kind, detail, warned keys)`: "built", "refused" (detail: the first key named) or "not RETURNN"."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", returnn.ReturnnConfigWarning)
        try:
            gradtx.from_returnn_config(str(path))
        except returnn.ReturnnConfigError as e:
            text = str(e)
            if RASR in text:
                return "not RETURNN", "RASR config", []
            named = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text.split(":", 1)[1])
            return "refused", named[0] if named else text.splitlines()[0][:80], []
    warned = [m.group(1) for w in caught if (m := re.search(r"config `([^`]+)`", str(w.message)))]
    return "built", "", warned


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=pathlib.Path, help="checkouts to search for *.config files")
    args = parser.parse_args(argv)
    kinds: collections.Counter[str] = collections.Counter()
    refused: collections.Counter[str] = collections.Counter()
    warned: collections.Counter[str] = collections.Counter()
    for root in args.roots:
        for path in sorted(root.rglob("*.config")):
            kind, detail, keys = outcome(path)
            kinds[kind] += 1
            if kind == "refused":
                refused[detail] += 1
            warned.update(set(keys))
    configs = kinds["built"] + kinds["refused"]
    print(f"{sum(kinds.values())} files: {kinds['not RETURNN']} RASR configs, {configs} RETURNN configs")
    share = 100 * kinds["built"] / max(configs, 1)
    print(f"built: {kinds['built']} ({share:.1f}%), refused: {kinds['refused']}")
    for key, n in refused.most_common():
        print(f"  refused naming `{key}`: {n}")
    for key, n in warned.most_common(10):
        print(f"  built with a warning about `{key}`: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
