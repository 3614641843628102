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
"""

from __future__ import annotations

import argparse
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
from typing import Any

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
    args = ap.parse_args(argv)
    _exit_when_orphaned(args.parent)

    import jax
    import numpy as np

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", DEVICES_PER_PROCESS)
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
    coordinator = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_FLAGS", "PYTEST_"))}
    env.update(
        JAX_PLATFORMS="cpu",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join(
            [str(pathlib.Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
        ),
    )
    procs, logs = [], []
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
            ]
            if die == pid:
                cmd.append("--die")
            with open(out, "wb") as fo, open(err, "wb") as fe:
                procs.append(subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=env))
            logs.append(err)
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
        for p in procs:  # only the children started above
            if p.poll() is None:
                p.kill()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    results = []
    for pid in range(num_processes):
        with np.load(workdir / f"result_{pid}.npz") as f:
            results.append({k: f[k] for k in f.files})
    return results


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
