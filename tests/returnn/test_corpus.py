"""Public RETURNN config files as their authors wrote them (tests/returnn/corpus.json, recorded by
tools/returnn_corpus.py from rwth-i6/returnn-experiments and rwth-i6/returnn): each builds, with the
warnings it gave when recorded, or is refused naming a key that changes the update."""

from __future__ import annotations

import json
import pathlib

from gradtx import returnn
from tests.returnn.corpus_records import decode, outcome

RECORDS = json.loads((pathlib.Path(__file__).parent / "corpus.json").read_text())
REPOSITORIES = ("rwth-i6/returnn-experiments@", "rwth-i6/returnn@")
UPDATE_KEYS = {
    key for kind in ("applied", "refused") for b in ("tf", "torch") for key in returnn.keys(kind, b)
}


def test_every_recorded_file_builds_or_is_refused_as_when_recorded():
    changed = [
        (r["source"], (r["kind"], r["detail"], r["warned"]), got)
        for r in RECORDS
        if (got := outcome(decode(r["config"]))) != (r["kind"], r["detail"], r["warned"])
    ]
    assert not changed, f"{len(changed)} of {len(RECORDS)} files changed outcome: {changed[:5]}"


def test_a_refusal_names_a_key_that_changes_the_update():
    refused = [r for r in RECORDS if r["kind"] == "refused"]
    assert refused and all(r["detail"] in UPDATE_KEYS for r in refused), {r["detail"] for r in refused}
    assert sum(r["kind"] == "built" for r in RECORDS) > 2 * len(refused)


def test_the_records_name_their_public_sources():
    assert all(r["source"].startswith(REPOSITORIES) and r["source"].endswith(".config") for r in RECORDS)
    assert {r["source"].split("@")[0] for r in RECORDS} == {s.rstrip("@") for s in REPOSITORIES}
