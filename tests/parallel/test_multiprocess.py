"""Two processes on 127.0.0.1 (4 CPU devices each, gloo collectives) train like one process with 8 devices;
a dead peer fails the run, a hung one ends the survivor at its `step_deadline`."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from tests.parallel import _worker


@pytest.mark.slow
def test_two_processes_train_like_one_process_with_eight_devices(tmp_path):
    results = _worker.launch(tmp_path, timeout=120)
    for kind in _worker.KINDS:
        reference = _worker.train(kind)  # in this process: 8 local devices (tests/conftest.py)
        assert reference["loss"][-1] < 0.8 * reference["loss"][0]
        for pid, got in enumerate(results):
            for name, expected in reference.items():
                np.testing.assert_allclose(
                    got[f"{kind}/{name}"],
                    expected,
                    rtol=1e-5,
                    atol=1e-6,
                    err_msg=f"{kind}: {name} of process {pid}",
                )


def test_a_dead_peer_fails_the_run_fast_with_a_clear_message(tmp_path):
    start = time.monotonic()
    with pytest.raises(
        RuntimeError,
        match=r"(?s)process 1 exited with code 3; the other processes were killed.*"
        r"stderr of process 1.*dying on purpose",
    ):
        _worker.launch(tmp_path, die=1, timeout=120)
    assert time.monotonic() - start < 60


def test_the_launcher_times_out_instead_of_hanging(tmp_path):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish within 1 s.*all processes were killed"):
        _worker.launch(tmp_path, timeout=1)
    assert time.monotonic() - start < 20


_DEADLINE = 4.0


def _survivor_ended_by_its_deadline(survivor: dict, pid: int) -> None:
    text = survivor["stderr"]
    assert f"process {pid}: step 1 done" in text, text  # the steps before the hang ran under the deadline
    assert survivor["code"] == 75, text
    assert re.search(
        rf"gradtx\.parallel\.step_deadline: step 2 did not finish within 4 s "
        rf"\(process {pid} of 2, pid \d+\)\. "
        r"A peer process is probably hung .* exits now with status 75.*"
        r"Where the step waits.*block_until_ready",
        text,
        re.S,
    ), text
    assert survivor["seconds"] < 25  # startup (~3 s) + steps 0-1 + the 4 s deadline


@pytest.mark.slow
def test_a_hung_peer_ends_the_survivor_at_its_step_deadline(tmp_path):
    """Process 1 sleeps before step 2 (alive: JAX's heartbeats go on, nothing else would notice); process
    0 waits in the step's all-reduce, and its `step_deadline` ends it. Without the deadline it stays
    blocked (measured: still waiting after 580 s). With the coordinator gone, JAX aborts the sleeper."""
    survivor, hung = _worker.launch_with_a_hung_peer(
        tmp_path, hang="sleep", hang_process=1, deadline=_DEADLINE, grace=5.0
    )
    assert "process 1: hanging (sleep) before step 2" in hung["stderr"]
    _survivor_ended_by_its_deadline(survivor, 0)
    assert hung["code"] is not None and hung["code"] != 0, "the sleeping process should have been aborted"


@pytest.mark.slow
def test_a_stopped_coordinator_ends_the_survivor_at_its_step_deadline(tmp_path):
    """Process 0 (the coordinator) stops itself (SIGSTOP) before step 2: process 1 ends at its deadline,
    before JAX's heartbeat timeout (20 s here) would abort it."""
    hung, survivor = _worker.launch_with_a_hung_peer(
        tmp_path, hang="stop", hang_process=0, deadline=_DEADLINE
    )
    assert "process 0: hanging (stop) before step 2" in hung["stderr"]
    assert hung["code"] is None  # still stopped: the launcher woke and killed it
    _survivor_ended_by_its_deadline(survivor, 1)
    assert "Terminating process because the JAX distributed service" not in survivor["stderr"]
