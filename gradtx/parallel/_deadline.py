"""Fail fast when a peer process hangs: `step_deadline`, a watchdog around one training step.

What the other processes of a multi-process run (`jax.distributed`, gloo CPU collectives)
do when one process stops taking part, measured with JAX 0.10.2 on 127.0.0.1 (H: the
`heartbeat_timeout_seconds` of `jax.distributed.initialize`, default 100 s; S: its
`shutdown_timeout_seconds`, default 300 s):

- a peer that dies after the first collective: the next collective raises at once (gloo:
  "Connection closed by peer"), and leaving Python then waits in `jax.distributed.shutdown`
  for the dead peer, until JAX aborts the process (SIGABRT) after min(H, S) -- 19.6 s with
  H = 20, S = 30; 30.4 s with H = 100, S = 30.
- a peer that dies before the first collective, or is frozen (SIGSTOP, a machine that
  stops answering): its heartbeats stop, and after H (plus 0-2 s) JAX aborts every other
  process ("Terminating process because the JAX distributed service detected fatal
  errors"). When the dead process is process 0 (the coordinator), the others fail at once.
- a peer that is alive but stuck (a Python loop, a dead lock, an input pipeline waiting for
  ever): its heartbeats go on, so nothing notices. The others wait inside the collective
  for good (still blocked after 580 s); only the very first collective of a run, which
  connects the gloo peers, gives up after a fixed 30 s ("Gloo context initialization
  failed ... GetKeyValue() timed out"), and exiting then waits up to S more.

A collective that waits cannot be cancelled from Python (the waiting thread is inside XLA),
so `step_deadline` does the one thing left: it reports the step that did not finish and
ends the process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import jax

from gradtx._core import checks as _checks

_FN = "step_deadline"


class _Watchdog:
    """One daemon thread per process that ends the process when the earliest open deadline passes."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open: dict[int, tuple[float, str, int, int]] = {}  # token -> (deadline, message, ident, code)
        self._next = 0
        self._pid: int | None = None  # the process whose thread runs (a forked child starts its own)

    def add(self, deadline: float, message: str, ident: int, exit_code: int) -> int:
        with self._cond:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="gradtx-step-deadline", daemon=True).start()
            self._next += 1
            self._open[self._next] = (deadline, message, ident, exit_code)
            self._cond.notify()
            return self._next

    def remove(self, token: int) -> None:
        with self._cond:
            self._open.pop(token, None)
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._open:
                    self._cond.wait()
                    continue
                deadline, message, ident, exit_code = min(self._open.values())
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                _expire(message, ident, exit_code)


_WATCHDOG = _Watchdog()


def _expire(message: str, ident: int, exit_code: int) -> None:
    """Say which step did not finish and where its thread waits, then end the process at once."""
    frame = sys._current_frames().get(ident)
    stack = "".join(traceback.format_stack(frame)) if frame is not None else "  <thread gone>\n"
    text = f"{message}\nWhere the step waits (most recent call last):\n{stack}"
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 -- a closed or broken stderr: still say it on the raw descriptor
        with contextlib.suppress(OSError):
            os.write(2, text.encode(errors="replace"))
    # `os._exit`, not `sys.exit`: the waiting thread cannot be interrupted, and the exit handlers
    # (`jax.distributed.shutdown`) would wait for the hung peer in turn.
    os._exit(exit_code)


def _who() -> str:
    if jax.distributed.is_initialized():
        return f"process {jax.process_index()} of {jax.process_count()}, pid {os.getpid()}"
    return f"pid {os.getpid()}"


@contextlib.contextmanager
def step_deadline(seconds: float, *, step: Any = None, exit_code: int = 75) -> Iterator[None]:
    """End this process with a clear message if the block does not finish within `seconds`.

    A watchdog for multi-process training (`jax.distributed`): when a peer process hangs --
    alive but stuck, so JAX's heartbeats still see it -- every other process waits in the
    step's next collective for good, and nothing can cancel that wait. Wrap each step in
    `step_deadline`: if the block has not finished `seconds` after it began, the process
    writes to stderr which step did not finish, within what deadline, which process it is,
    and the stack of the waiting thread, then exits at once with status `exit_code` (75,
    EX_TEMPFAIL: "try again", by default) without running exit handlers (which would wait
    for the peer too). Restart the job from its last checkpoint, e.g. on the processes
    that remain (`shard_state` moves a `sharded_state` to fewer devices).

    JAX dispatches asynchronously: the block must wait for the step's results
    (`jax.block_until_ready`), or the deadline only covers the dispatch. Give the first
    step, which compiles, a longer deadline. A dead or frozen (SIGSTOP) peer is detected by
    JAX itself: `jax.distributed.initialize(..., heartbeat_timeout_seconds=H)` makes every
    other process abort about H seconds later (default 100 s; lower
    `shutdown_timeout_seconds` too, default 300 s, which bounds the wait at exit after a
    peer died). A peer that is alive but stuck keeps its heartbeats going: only
    `step_deadline` ends that wait. Once the coordinator (process 0) is gone, JAX aborts the
    remaining processes, the stuck one included. One watchdog thread serves all deadlines of
    a process; entering and leaving a block costs about 8 microseconds. Deadlines nest: the
    earliest one fires.

    Args:
      seconds: the longest the block may take, in seconds (> 0).
      step: what to call the block in the message: the step number, a name; optional.
      exit_code: the process's exit status when the deadline passes (1 to 255).

    Returns:
      A context manager: the deadline runs from entering the block to leaving it (by an
      exception too).

    Raises:
      ValueError: if `seconds` is not finite and > 0, or `exit_code` not in 1..255.
      TypeError: if `seconds` is not a number or `exit_code` not an int.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> step = jax.jit(lambda x: x * 2.0)
        >>> x = jnp.ones(3)
        >>> for t in range(3):  # a step that does not finish in 60 s ends the process with status 75
        ...     with gradtx.parallel.step_deadline(60.0, step=t):
        ...         x = jax.block_until_ready(step(x))
        >>> x.tolist()
        [8.0, 8.0, 8.0]

        What a process prints to stderr when the deadline passes (then it exits with 75)::

            gradtx.parallel.step_deadline: step 7 did not finish within 30 s (process 0 of 2,
            pid 4242). A peer process is probably hung (alive but stuck) or dead, or the step
            is slower than the deadline. ...
    """
    _checks.check_number(_FN, "seconds", seconds)
    if not float(seconds) > 0:
        raise ValueError(f"`{_FN}`: `seconds` must be > 0, got {seconds!r}.")
    _checks.check_int(_FN, "exit_code", exit_code, minimum=1, maximum=255)
    seconds = float(seconds)
    what = "the block" if step is None else f"step {step}"
    message = (
        f"gradtx.parallel.step_deadline: {what} did not finish within {seconds:g} s ({_who()}). A peer "
        f"process is probably hung (alive but stuck) or dead, or the step is slower than the deadline. "
        f"A collective that waits cannot be cancelled, so this process exits now with status "
        f"{exit_code}; restart the job from its last checkpoint."
    )
    token = _WATCHDOG.add(time.monotonic() + seconds, message, threading.get_ident(), exit_code)
    try:
        yield
    finally:
        _WATCHDOG.remove(token)
