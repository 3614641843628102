"""Distributed Muon under ZeRO-1 (`sharded_state(split_matrix_work(chain(clip, muon)))`): its state saved
with orbax by 2 processes x 4 devices (each writing its own shards) restores on 1 process x 8 devices and
on 2 x 2, and the resumed runs end where the uninterrupted one did; a process killed (SIGKILL) in the
middle of a later save leaves the earlier checkpoint the latest, and restorable."""

from __future__ import annotations

import re
import shutil
import signal

import numpy as np
import pytest

from tests.parallel import _multihost_ckpt_worker as w


def _chunks(database, key):
    """The chunk indices of the array `key` stored in one process's OCDBT database (orbax's own format)."""
    import tensorstore as ts

    kv = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{database}/"}).result()
    found = set()
    for name in (k.decode() for k in kv.list().result()):
        m = re.fullmatch(rf"{re.escape(key)}/(?:c/)?(\d+)[./](\d+)", name)
        if m:
            found.add((int(m[1]), int(m[2])))
    return found


def _same(got, expected, what, *, resumed=True):
    """The final parameters and state of two runs, and the losses of the steps `got` ran."""
    names = [k for k in expected if k.startswith(("param/", "state/"))] + ["loss"]
    # 4 parameters; the clip's 2 scalars, the biases' AdamW (a count, 2 x 2 slots), Muon's count and momenta
    assert len(names) == 4 + (2 + 5 + 3) + 1, names
    for name in names:
        want = expected[name][w.SAVED_AT :] if name == "loss" and resumed else expected[name]
        np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6, err_msg=f"{what}: {name}")


@pytest.mark.slow
def test_a_zero_state_saved_by_two_hosts_resumes_on_other_topologies_and_survives_a_killed_save(tmp_path):
    ckpt = tmp_path / "checkpoints"
    first = w.launch_first_and_kill(tmp_path, ckpt)

    # (1) 2 x 4: both processes ran the same uninterrupted run, which learned.
    uninterrupted, other = first["results"]
    _same(other, uninterrupted, "process 1 of the first run", resumed=False)
    assert uninterrupted["compilations"] == 1
    assert uninterrupted["loss"][-1] < 0.5 * uninterrupted["loss"][0]
    # Each process wrote the shards of its own devices: Muon's momentum of w1 (12 x 16) is split over the 8
    # devices on its columns (16 = 8 x 2; 12 rows do not divide by 8): chunks 0-3 on process 0, 4-7 on 1.
    item = ckpt / str(w.SAVED_AT) / "default"
    for process in (0, 1):
        chunks = _chunks(item / f"ocdbt.process_{process}", "opt_state.inner.1.muon.0.momentum.w1")
        assert chunks == {(0, c) for c in range(4 * process, 4 * process + 4)}, (process, chunks)

    # (4) Process 1 was killed while it wrote step KILLED_AT; process 0 could not finish that save alone.
    assert f"process 0: saving step {w.KILLED_AT}" in first["stderr"][0]
    assert f"step {w.KILLED_AT} saved" not in "".join(first["stderr"])
    assert first["codes"][w.KILLED_PROCESS] == -signal.SIGKILL
    assert first["codes"][0] not in (None, 0), first["stderr"][0][-3000:]  # it failed by itself
    assert "heartbeat" in first["stderr"][0]  # on learning that its peer is gone
    left = sorted(p.name for p in ckpt.iterdir())
    assert left[0] == str(w.SAVED_AT) and left[1].startswith(f"{w.KILLED_AT}.orbax-checkpoint-tmp"), left
    assert len(left) == 2, left

    # (2) 1 x 8 (this process): restores step SAVED_AT, the partial save ignored, and ends where 2 x 4 did.
    here = w.resume(ckpt)
    assert int(here["restored_step"]) == w.SAVED_AT and here["steps"].tolist() == [w.SAVED_AT]
    assert here["compilations"] == 1  # restored into the shardings `init` gives on this mesh
    assert here["layout"] == uninterrupted["layout"] == "P(None, 'data')"
    _same(here, uninterrupted, "1 x 8")

    # (3) 2 x 2: the same, each process restoring the shards its own two devices hold. The state's layout
    # depends on the device count (w1's slots split on their rows here); orbax re-lays it out.
    for process, got in enumerate(w.launch_resume(tmp_path, ckpt, num_processes=2, devices=2)):
        assert int(got["restored_step"]) == w.SAVED_AT and got["steps"].tolist() == [w.SAVED_AT]
        assert got["compilations"] == 1
        assert got["layout"] == "P('data', None)"  # on 4 devices the 12 rows divide: another layout
        _same(got, uninterrupted, f"2 x 2, process {process}")
    shutil.rmtree(ckpt / left[1])  # the killed save's partial shards (up to 256 MB)
