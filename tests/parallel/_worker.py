"""Multi-process data parallelism on one machine: a launcher, its worker, and the training both run.

`launch(workdir)` starts `NUM_PROCESSES` copies of this file as worker processes (the
Python running the tests) on 127.0.0.1: each gets `DEVICES_PER_PROCESS` CPU devices,
`jax.distributed.initialize` joins them (the gloo CPU collectives), and each runs
`train` for every kind in `KINDS` on the global mesh, then saves what it sees to
`<workdir>/result_<process>.npz`. The launcher uses a free port, writes each child's
output to a file (no pipe can fill up), polls them, and the moment one exits with an
error (or the time limit passes) kills the other children it started -- by their own
`Popen` handles, nothing else -- and raises with the tail of every child's stderr. A worker
whose launcher disappears exits by itself.

`train(kind)` is also what the test runs in-process on 8 local devices: same data,
same model, same steps, so the results must agree.

`launch_with_a_hung_peer` runs `steps_with_a_hung_peer` instead (one CPU device per process):
all-reduce steps under `gradtx.parallel.step_deadline`, one process hanging (asleep or
SIGSTOP-ped) before a step, and reports when and how each process ended.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tests import fast_xla

NUM_PROCESSES = 2
DEVICES_PER_PROCESS = 4
KINDS = ("cross_shard", "sharded_state")
STEPS = 15
AXIS = "data"


# --------------------------------------------------------------------------- the training (both sides)


def train(kind: str, steps: int = STEPS, seed: int = 0) -> dict[str, Any]:
    """Data-parallel training of a small MLP with `kind` on all devices; replica 0's view of the results."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import gradtx

    n = jax.device_count()
    mesh = jax.make_mesh((n,), (AXIS,))
    rng = np.random.default_rng(seed)
    batch = 8 * n
    x = rng.standard_normal((steps, batch, 6)).astype(np.float32)
    teacher = rng.standard_normal((6, 2)).astype(np.float32)
    y = np.tanh(x @ teacher).astype(np.float32)
    params0 = {
        "w1": (0.5 * rng.standard_normal((6, 16))).astype(np.float32),
        "b1": np.zeros(16, np.float32),
        "w2": (0.5 * rng.standard_normal((16, 2))).astype(np.float32),
        "b2": np.zeros(2, np.float32),
    }

    def global_array(a, spec):
        return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec), lambda idx: a[idx])

    def loss_fn(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

    inner = gradtx.adam(0.01)
    if kind == "cross_shard":
        tx, state_spec = gradtx.parallel.cross_shard(inner, AXIS), P()
    elif kind == "sharded_state":
        tx, state_spec = gradtx.parallel.sharded_state(inner, AXIS), P(AXIS)
    else:
        raise ValueError(f"unknown kind {kind!r}")

    init = jax.jit(jax.shard_map(tx.init, mesh=mesh, in_specs=P(), out_specs=state_spec))

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P(), state_spec, P(AXIS), P(AXIS)), out_specs=(P(), state_spec, P()))
    def step(p, state, x, y):
        value, grads = jax.value_and_grad(loss_fn)(gradtx.parallel.per_replica(p, AXIS), x, y)
        updates, state = tx.update(grads, state, p)
        return gradtx.apply_updates(p, updates), state, jax.lax.pmean(value, AXIS)

    params = {k: global_array(v, P()) for k, v in params0.items()}
    state = init(params)
    losses = []
    for t in range(steps):
        params, state, value = jax.block_until_ready(
            step(params, state, global_array(x[t], P(AXIS)), global_array(y[t], P(AXIS)))
        )
        losses.append(np.asarray(value.addressable_shards[0].data))
    out = {f"param/{k}": np.asarray(v.addressable_shards[0].data) for k, v in params.items()}
    out["loss"] = np.asarray(losses)
    return out


# --------------------------------------------------------------------------- a hung peer (both sides)

HANG_AT = 2  # the step before which the hanging process stops taking part
HANG_STEPS = 4


def steps_with_a_hung_peer(process_id: int, hang: str, hang_process: int, deadline: float) -> None:
    """All-reduce steps, each under `step_deadline`; process `hang_process` hangs before step `HANG_AT`.

    It hangs outside its own deadline (as a process stuck in its input pipeline would), by
    sleeping ("sleep": alive, its heartbeats go on) or by stopping itself ("stop": SIGSTOP,
    frozen). The others enter the step's collective and wait for it.
    """
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import gradtx

    mesh = jax.make_mesh((jax.device_count(),), (AXIS,))
    total = jax.jit(
        jax.shard_map(lambda x: jax.lax.psum(x, AXIS), mesh=mesh, in_specs=P(AXIS), out_specs=P())
    )
    ones = np.ones(jax.device_count(), np.float32)
    x = jax.make_array_from_callback(ones.shape, NamedSharding(mesh, P(AXIS)), lambda idx: ones[idx])
    for t in range(HANG_STEPS):
        if process_id == hang_process and t == HANG_AT:
            print(f"process {process_id}: hanging ({hang}) before step {t}", file=sys.stderr, flush=True)
            if hang == "sleep":
                time.sleep(3600)
            else:
                os.kill(os.getpid(), signal.SIGSTOP)
        with gradtx.parallel.step_deadline(60.0 if t == 0 else deadline, step=t):  # step 0 compiles
            value = jax.block_until_ready(total(x))
        assert float(value.addressable_shards[0].data[0]) == jax.device_count()
        print(f"process {process_id}: step {t} done", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the worker


def _exit_when_orphaned(parent: int) -> None:
    def watch():
        while True:
            if os.getppid() != parent:
                os._exit(70)
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


def _worker(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--process-id", type=int, required=True)
    ap.add_argument("--num-processes", type=int, required=True)
    ap.add_argument("--coordinator", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument(
        "--die", action="store_true", help="exit with code 3 right after joining (tests the launcher)"
    )
    ap.add_argument("--hang", choices=("sleep", "stop"), help="run `steps_with_a_hung_peer` instead")
    ap.add_argument("--hang-process", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=4.0)
    args = ap.parse_args(argv)
    _exit_when_orphaned(args.parent)

    import jax
    import numpy as np

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 1 if args.hang else DEVICES_PER_PROCESS)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=args.coordinator,
        num_processes=args.num_processes,
        process_id=args.process_id,
        initialization_timeout=60,
        heartbeat_timeout_seconds=20,
        shutdown_timeout_seconds=30,
    )
    if args.die:
        print(f"process {args.process_id}: dying on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    if args.hang:
        steps_with_a_hung_peer(args.process_id, args.hang, args.hang_process, args.deadline)
        jax.distributed.shutdown()
        return 0
    assert jax.device_count() == args.num_processes * DEVICES_PER_PROCESS, jax.devices()
    results = {}
    for kind in KINDS:
        for k, v in train(kind).items():
            results[f"{kind}/{k}"] = v
    np.savez(args.out, **results)
    jax.distributed.shutdown()
    return 0


# --------------------------------------------------------------------------- the launcher


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: pathlib.Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "<no output>"
    text = [t for t in text if "Gloo" not in t]  # gloo's connection chatter
    return "\n".join("    " + t for t in text[-lines:]) or "    <empty>"


def environment() -> dict[str, str]:
    """A worker's environment: this one's without JAX's and pytest's settings, the repository on the path,
    and the suite's compile options (`tests.fast_xla`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_FLAGS", "PYTEST_"))}
    env.update(
        JAX_PLATFORMS="cpu",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join(
            [str(pathlib.Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
        ),
    )
    flags = fast_xla.xla_flags(None)
    if flags is not None:
        env["XLA_FLAGS"] = flags
    return env


def _start(
    workdir: pathlib.Path, num_processes: int, extra: Callable[[int], list[str]]
) -> tuple[list[subprocess.Popen], list[pathlib.Path]]:
    """Start the workers (`extra(pid)`: more arguments for worker `pid`); their `Popen`s and stderr files."""
    coordinator = f"127.0.0.1:{free_port()}"
    env = environment()
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for pid in range(num_processes):
            out, err = workdir / f"stdout_{pid}.txt", workdir / f"stderr_{pid}.txt"
            cmd = [
                sys.executable,
                str(pathlib.Path(__file__).resolve()),
                "--process-id",
                str(pid),
                "--num-processes",
                str(num_processes),
                "--coordinator",
                coordinator,
                "--out",
                str(workdir / f"result_{pid}.npz"),
                "--parent",
                str(os.getpid()),
                *extra(pid),
            ]
            with open(out, "wb") as fo, open(err, "wb") as fe:
                procs.append(subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=env))
            logs.append(err)
    except BaseException:
        _stop(procs)
        raise
    return procs, logs


def _stop(procs: list[subprocess.Popen]) -> None:
    """Kill the children started here that still run (by their `Popen`s: a stopped one is woken first)."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(OSError):
                p.send_signal(signal.SIGCONT)
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def launch(
    workdir: Any, *, timeout: float = 120.0, die: int | None = None, num_processes: int = NUM_PROCESSES
) -> list[dict[str, Any]]:
    """Run the workers to completion and return each one's results (NumPy arrays by name).

    Raises:
      RuntimeError: when a worker exits with an error (the others are killed at once).
      TimeoutError: when they are not all done within `timeout` seconds (all are killed).
    """
    import numpy as np

    workdir = pathlib.Path(workdir)
    procs, logs = _start(workdir, num_processes, lambda pid: ["--die"] if die == pid else [])
    try:
        deadline = time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i, code = failed[0]
                raise RuntimeError(
                    f"multi-process run failed: process {i} exited with code {code}; the other processes "
                    f"were killed.\n"
                    + "\n".join(
                        f"  stderr of process {j} (tail):\n{_tail(log)}" for j, log in enumerate(logs)
                    )
                )
            if all(c == 0 for c in codes):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"multi-process run did not finish within {timeout:.0f} s (still running: "
                    f"{[i for i, c in enumerate(codes) if c is None]}); all processes were killed.\n"
                    + "\n".join(
                        f"  stderr of process {j} (tail):\n{_tail(log)}" for j, log in enumerate(logs)
                    )
                )
            time.sleep(0.05)
    finally:
        _stop(procs)  # only the children started above
    results = []
    for pid in range(num_processes):
        with np.load(workdir / f"result_{pid}.npz") as f:
            results.append({k: f[k] for k in f.files})
    return results


def launch_with_a_hung_peer(
    workdir: Any, *, hang: str, hang_process: int, deadline: float, grace: float = 0.0, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Run `steps_with_a_hung_peer` on `NUM_PROCESSES` processes until every one but the hung one has exited.

    Then waits up to `grace` seconds more for the hung one (a sleeping process is aborted by
    JAX once the coordinator is gone), and kills whatever still runs (SIGCONT first: a
    stopped one too). Gives up after `timeout` seconds in all.

    Returns:
      Per process: `code` (its exit status; None if it had to be killed), `seconds` (from the
      launch to its exit, or to the kill) and `stderr` (all of it).
    """
    workdir = pathlib.Path(workdir)
    start = time.monotonic()
    procs, logs = _start(
        workdir,
        NUM_PROCESSES,
        lambda pid: ["--hang", hang, "--hang-process", str(hang_process), "--deadline", str(deadline)],
    )
    ended: dict[int, float] = {}
    try:
        others = [i for i in range(NUM_PROCESSES) if i != hang_process]
        until = start + timeout
        while time.monotonic() < until and not (set(others) <= set(ended) and hang_process in ended):
            for i, p in enumerate(procs):
                if i not in ended and p.poll() is not None:
                    ended[i] = time.monotonic() - start
            if set(others) <= set(ended):
                until = min(until, start + max(ended.values()) + grace)
            time.sleep(0.05)
    finally:
        _stop(procs)
    return [
        {
            "code": p.returncode if i in ended else None,
            "seconds": ended.get(i, time.monotonic() - start),
            "stderr": logs[i].read_text(errors="replace"),
        }
        for i, p in enumerate(procs)
    ]


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
