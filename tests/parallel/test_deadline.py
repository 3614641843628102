"""`step_deadline` in one process: quiet while blocks finish in time, ends the process when one does not.

The two-process runs with a hung peer are in test_multiprocess.py.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gradtx
from gradtx.parallel import step_deadline

_SCRIPT = textwrap.dedent(
    """
    import time
    from gradtx.parallel import step_deadline

    for t in range(50):  # blocks that finish in time: nothing happens after their deadlines pass
        with step_deadline(0.05, step=t):
            pass
    try:
        with step_deadline(0.05, step="raising"):
            raise KeyError("left by an exception")
    except KeyError:
        pass
    time.sleep(0.3)
    print("survived", flush=True)

    def stuck():
        time.sleep(30)

    with step_deadline(30.0, step="outer"):
        with step_deadline(0.3, exit_code=9):  # nested: the earliest deadline fires
            stuck()
    print("not reached", flush=True)
    """
)


def test_a_block_past_its_deadline_ends_the_process_with_a_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_FLAGS", "PYTEST_"))}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[2]))
    script = tmp_path / "stuck.py"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.stdout.splitlines() == ["survived"], done.stdout + done.stderr
    assert done.returncode == 9, done.stderr
    assert "gradtx.parallel.step_deadline: the block did not finish within 0.3 s (pid " in done.stderr, (
        done.stderr
    )
    assert "exits now with status 9" in done.stderr
    assert "Where the step waits (most recent call last):" in done.stderr
    assert "in stuck\n    time.sleep(30)" in done.stderr  # the stack of the waiting thread
    assert "outer" not in done.stderr


def test_a_block_in_time_changes_nothing():
    x = np.arange(3.0)
    with step_deadline(60.0, step=0):
        y = x * 2
    np.testing.assert_array_equal(y, [0.0, 2.0, 4.0])
    assert gradtx.parallel.step_deadline is step_deadline


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"seconds": 0}, ValueError, r"`step_deadline`: `seconds` must be > 0, got 0\."),
        ({"seconds": -1.5}, ValueError, r"`step_deadline`: `seconds` must be > 0, got -1\.5\."),
        ({"seconds": float("inf")}, ValueError, r"`step_deadline`: `seconds` must be finite, got inf\."),
        ({"seconds": float("nan")}, ValueError, r"`step_deadline`: `seconds` must be finite, got nan\."),
        ({"seconds": "10"}, TypeError, r"`step_deadline`: `seconds` must be a number"),
        ({"seconds": 1.0, "exit_code": 0}, ValueError, r"`step_deadline`: `exit_code` must be >= 1, got 0\."),
        ({"seconds": 1.0, "exit_code": 256}, ValueError, r"`step_deadline`: `exit_code` must be <= 255"),
        ({"seconds": 1.0, "exit_code": 7.0}, TypeError, r"`step_deadline`: `exit_code` must be an integer"),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match), step_deadline(**kwargs):
        pass
