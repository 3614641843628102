"""Try `gradtx.from_returnn_config` on every RETURNN config file of some checkouts, as a RETURNN user would.

    git clone https://github.com/rwth-i6/returnn-experiments /tmp/rx
    git clone https://github.com/rwth-i6/returnn /tmp/returnn
    python tools/returnn_corpus.py /tmp/rx /tmp/returnn

Every `*.config` file under the given directories is built with the defaults (no argument but the
path), and tallied: built (with the warnings of keys RETURNN runs without), refused by the first key
the refusal names, or not a RETURNN config (a RASR / Sprint config, whose files share the suffix).
The "From RETURNN" guide shows the tally of both repositories. The files themselves are not copied
into this repository: returnn-experiments carries no licence, and RETURNN's own forbids commercial use.

With `--records FILE`, a sample of the files (every refused or warned one and every eighth
of the rest) is written as records of what the update reads, which `make test` builds
(tests/returnn/test_corpus.py): per file its source, its outcome, and its values as the reader gives
them -- in full for the keys of RETURNN's updater and learning-rate control, the layer graph of
`network` when the file pretrains, other values only where they are a number, a flag or a short
string. A record is written only when it gives the file's own outcome.

    python tools/returnn_corpus.py /tmp/rx /tmp/returnn --records tests/returnn/corpus.json \
        --source rwth-i6/returnn-experiments@<commit> --source rwth-i6/returnn@<commit>
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from gradtx.returnn import _reader  # noqa: E402
from tests.returnn.corpus_records import decode, distilled, outcome  # noqa: E402


def write_records(
    found: list[tuple[pathlib.Path, pathlib.Path, tuple]], sources: list[str], out: pathlib.Path
) -> None:
    """The sample's records, each checked to give its file's own outcome."""
    records, rest = [], 0
    for (root, path, result), source in zip(found, _sources(found, sources), strict=True):
        kind, _, warned = result
        if kind in ("not RETURNN", "unreadable"):
            continue
        config = _reader.read_config(str(path))
        if kind == "built" and not warned:
            rest += 1
            if rest % 8:
                continue
        record = {
            "source": f"{source}:{path.relative_to(root)}",
            "kind": kind,
            "detail": result[1],
            "warned": warned,
            "config": distilled(config),
        }
        if outcome(decode(record["config"])) != result:
            print(f"not written (the record's outcome differs): {path}", file=sys.stderr)
            continue
        records.append(record)
    out.write_text("[\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in records) + "\n]\n")
    print(f"{len(records)} records written to {out}")


def _sources(found: list, sources: list[str]) -> list[str]:
    roots = list(dict.fromkeys(f[0] for f in found))
    names = dict(zip(roots, sources or [str(r) for r in roots], strict=False))
    return [names[f[0]] for f in found]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=pathlib.Path, help="checkouts to search for *.config files")
    parser.add_argument("--records", type=pathlib.Path, help="write a sample of records for make test here")
    parser.add_argument("--source", action="append", default=[], help="each root's repository@commit")
    args = parser.parse_args(argv)
    kinds: collections.Counter[str] = collections.Counter()
    refused: collections.Counter[str] = collections.Counter()
    warned: collections.Counter[str] = collections.Counter()
    found = []
    for root in args.roots:
        for path in sorted(root.rglob("*.config")):
            kind, detail, keys = result = outcome(path)
            found.append((root, path, result))
            kinds[kind] += 1
            if kind == "refused":
                refused[detail] += 1
            warned.update(set(keys))
    configs = kinds["built"] + kinds["refused"] + kinds["unreadable"]
    print(f"{sum(kinds.values())} files: {kinds['not RETURNN']} RASR configs, {configs} RETURNN configs")
    share = 100 * kinds["built"] / max(configs, 1)
    print(
        f"built: {kinds['built']} ({share:.1f}%), refused: {kinds['refused']}, not valid Python "
        f"(RETURNN cannot read them either): {kinds['unreadable']}"
    )
    for key, n in refused.most_common():
        print(f"  refused naming `{key}`: {n}")
    for key, n in warned.most_common(10):
        print(f"  built with a warning about `{key}`: {n}")
    if args.records:
        write_records(found, args.source, args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
