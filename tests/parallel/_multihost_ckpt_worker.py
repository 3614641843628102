"""Multi-host checkpoints of a ZeRO-1 run with orbax: the training, its worker processes, and their launcher.

The run: an MLP on fixed random data, trained with distributed Muon under ZeRO-1,
`sharded_state(split_matrix_work(chain(clip_by_global_norm, muon)), "data", mesh=mesh)`, under
plain `jax.jit` on a mesh that spans every process: the optimizer state split over all
devices (each leaf keeps its shape, so a checkpoint does not depend on the device count),
each matrix's Newton-Schulz iterations on one device (its biases take Muon's AdamW). Saved
with `orbax.checkpoint.CheckpointManager`: every process writes the shards its own devices hold.

- `first_run` (2 processes x 4 devices): `SAVED_AT` steps, a checkpoint, the other steps
  (the uninterrupted run, whose results it writes out), then a save of a large dummy leaf
  at step `KILLED_AT`, during which the launcher kills process `KILLED_PROCESS` (SIGKILL).
- `resume` (any topology: 1 process x 8 devices in the test's own process, 2 x 2 here):
  restores the latest checkpoint -- `SAVED_AT`, the killed save ignored -- into the
  shardings of its own mesh, and runs the same remaining steps.

`launch_first_and_kill` and `launch_resume` start the workers (this file) on 127.0.0.1 with
the gloo CPU collectives, as `tests/parallel/_worker.py` does: a free port, each child's
output in a file, a time limit, and every child they started killed by its own `Popen`
handle at the end (a worker whose launcher disappears exits by itself).
"""

from __future__ import annotations

import argparse
import glob
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

if __name__ == "__main__":  # run as a script: the repository root on the path, for `tests` and `gradtx`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from tests.parallel import _worker

AXIS = "data"
STEPS = 8
SAVED_AT = 3  # the checkpoint every resumed run starts from
KILLED_AT = STEPS  # the step of the save that is killed half-way
KILLED_PROCESS = 1
BIG = 8_000_000  # float32s per device in the killed save's dummy leaf: about a second of writing
HEARTBEAT_S = 10  # how soon the survivor of the kill learns that its peer is gone
SHAPES = {"w1": (12, 16), "b1": (16,), "w2": (16, 3), "b2": (3,)}  # b2: 3 elements, on 8 or 4 devices
BATCH = 32
_T0 = time.monotonic()


def say(message: str) -> None:
    """`process <i>: <message> (<seconds since the worker started> s)` on stderr."""
    import jax

    seconds = time.monotonic() - _T0
    print(f"process {jax.process_index()}: {message} ({seconds:.1f} s)", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the training (every topology)


def problem() -> tuple[dict[str, Any], Any, Any]:
    """The initial parameters and every step's batch (NumPy): the same in every process and topology."""
    import numpy as np

    rng = np.random.default_rng(0)
    params = {k: (0.3 * rng.standard_normal(s)).astype(np.float32) for k, s in SHAPES.items()}
    x = rng.standard_normal((STEPS, BATCH, SHAPES["w1"][0])).astype(np.float32)
    y = np.tanh(x @ rng.standard_normal((SHAPES["w1"][0], SHAPES["w2"][1]))).astype(np.float32)
    return params, x, y


def inner_tx():
    import gradtx

    return gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.muon(0.05))


def momentum_w1(state: Any) -> Any:
    """Muon's momentum of `w1` in the run's state."""
    return state.inner[1]["muon"][0].momentum["w1"]


class Run:
    """ZeRO-1 under `jax.jit` on a mesh of every device of every process."""

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp

        import gradtx

        self.mesh = jax.make_mesh((jax.device_count(),), (AXIS,))
        matrix_work = gradtx.parallel.split_matrix_work(inner_tx(), mesh=self.mesh)
        self.tx = gradtx.parallel.sharded_state(matrix_work, AXIS, mesh=self.mesh)
        self.params0, self.x, self.y = problem()

        def loss_fn(p, x, y):
            h = jnp.tanh(x @ p["w1"] + p["b1"])
            return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

        def step(p, s, x, y):
            value, grads = jax.value_and_grad(loss_fn)(p, x, y)
            updates, s = self.tx.update(grads, s, p)
            return gradtx.apply_updates(p, updates), s, value

        self.step = jax.jit(step)

    def global_array(self, a: Any, *spec: Any) -> Any:
        """A global array of the NumPy array `a` (each process supplies the shards of its own devices)."""
        import jax
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        return jax.make_array_from_callback(a.shape, NamedSharding(self.mesh, P(*spec)), lambda i: a[i])

    def start(self) -> tuple[Any, Any]:
        import jax

        with jax.set_mesh(self.mesh):
            params = {k: self.global_array(v, *[None] * v.ndim) for k, v in self.params0.items()}
            return params, self.tx.init(params)

    def target(self) -> dict[str, Any]:
        """What a checkpoint restores into: shapes, dtypes and this mesh's shardings, nothing allocated."""
        import gradtx

        return gradtx.parallel.restore_target(self.tx, self.params0, self.mesh)

    def train(self, params: Any, state: Any, start: int, stop: int) -> tuple[Any, Any, list[float]]:
        import jax
        import numpy as np
        from jax.experimental import multihost_utils

        losses = []
        with jax.set_mesh(self.mesh):
            for t in range(start, stop):
                x, y = self.global_array(self.x[t], AXIS), self.global_array(self.y[t], AXIS)
                params, state, value = jax.block_until_ready(self.step(params, state, x, y))
                losses.append(float(np.asarray(multihost_utils.process_allgather(value, tiled=True))))
        return params, state, losses

    def results(self, params: Any, state: Any, losses: list[float]) -> dict[str, Any]:
        """The whole parameters and whole inner state (NumPy, gathered from every process), and the losses:
        every process must call it."""
        import jax
        import numpy as np
        from jax.experimental import multihost_utils

        import gradtx

        host = lambda tree: jax.tree.map(  # noqa: E731
            lambda a: np.asarray(multihost_utils.process_allgather(a, tiled=True)), tree
        )
        # the global state as it is: `unshard_state` gathers what other processes hold
        whole = gradtx.parallel.unshard_state(state, jax.eval_shape(inner_tx().init, self.params0))
        out = {f"param/{k}": v for k, v in host(params).items()}
        flat = jax.tree_util.tree_flatten_with_path(whole)[0]
        out.update({f"state/{jax.tree_util.keystr(path)}": np.asarray(v) for path, v in flat})
        out["loss"] = np.asarray(losses)
        return out


def manager(directory: Any):
    import orbax.checkpoint as ocp

    return ocp.CheckpointManager(os.path.abspath(directory))


def first_run(directory: Any, out: Any) -> None:
    """Train, save at `SAVED_AT`, train on (writing out the uninterrupted run), then start the killed save."""
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    run = Run()
    params, state = run.start()
    mngr = manager(directory)
    params, state, losses = run.train(params, state, 0, SAVED_AT)
    mngr.save(SAVED_AT, args=ocp.args.StandardSave({"params": params, "opt_state": state}))
    mngr.wait_until_finished()
    say(f"step {SAVED_AT} saved")
    params, state, more = run.train(params, state, SAVED_AT, STEPS)
    results = run.results(params, state, losses + more)
    results["compilations"] = np.asarray(run.step._cache_size())
    results["layout"] = np.asarray(str(momentum_w1(state).sharding.spec))
    np.savez(out, **results)
    say(f"trained to step {STEPS}")
    big = jax.make_array_from_callback(  # one row per device, written by the device's own process
        (jax.device_count(), BIG),
        NamedSharding(run.mesh, P(AXIS)),
        lambda i: np.random.default_rng(i[0].start).random((1, BIG), np.float32),  # incompressible
    )
    say(f"saving step {KILLED_AT}")
    mngr.save(KILLED_AT, args=ocp.args.StandardSave({"params": params, "opt_state": state, "big": big}))
    mngr.wait_until_finished()  # the launcher kills process KILLED_PROCESS before this returns
    say(f"step {KILLED_AT} saved")


def resume(directory: Any) -> dict[str, Any]:
    """Restore the latest checkpoint into this topology's shardings and run the remaining steps."""
    import numpy as np
    import orbax.checkpoint as ocp

    run = Run()
    mngr = manager(directory)
    step = mngr.latest_step()
    restored = mngr.restore(step, args=ocp.args.StandardRestore(run.target()))
    mngr.close()
    layout = str(momentum_w1(restored["opt_state"]).sharding.spec)
    params, state, losses = run.train(restored["params"], restored["opt_state"], step, STEPS)
    results = run.results(params, state, losses)
    results["restored_step"] = np.asarray(step)
    results["steps"] = np.asarray(mngr.all_steps())
    results["compilations"] = np.asarray(run.step._cache_size())
    results["layout"] = np.asarray(layout)
    return results


# --------------------------------------------------------------------------- the worker


def _main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", choices=("first", "resume"), required=True)
    ap.add_argument("--process-id", type=int, required=True)
    ap.add_argument("--num-processes", type=int, required=True)
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--coordinator", required=True)
    ap.add_argument("--checkpoints", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--parent", type=int, required=True)
    args = ap.parse_args(argv)
    _worker._exit_when_orphaned(args.parent)

    import jax
    import numpy as np

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", args.devices)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=args.coordinator,
        num_processes=args.num_processes,
        process_id=args.process_id,
        initialization_timeout=60,
        heartbeat_timeout_seconds=HEARTBEAT_S,
        shutdown_timeout_seconds=30,
    )
    assert jax.device_count() == args.num_processes * args.devices, jax.devices()
    if args.phase == "first":
        first_run(args.checkpoints, args.out)
    else:
        np.savez(args.out, **resume(args.checkpoints))
        say("resumed run done")
    jax.distributed.shutdown()
    return 0


# --------------------------------------------------------------------------- the launcher


def _start(workdir: pathlib.Path, phase: str, num_processes: int, devices: int, checkpoints: Any):
    coordinator = f"127.0.0.1:{_worker.free_port()}"
    env = _worker.environment()
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for pid in range(num_processes):
            err = workdir / f"{phase}_stderr_{pid}.txt"
            cmd = [
                sys.executable,
                str(pathlib.Path(__file__).resolve()),
                *("--phase", phase, "--process-id", str(pid), "--num-processes", str(num_processes)),
                *("--devices", str(devices), "--coordinator", coordinator, "--checkpoints", str(checkpoints)),
                *("--out", str(workdir / f"{phase}_result_{pid}.npz"), "--parent", str(os.getpid())),
            ]
            with open(workdir / f"{phase}_stdout_{pid}.txt", "wb") as fo, open(err, "wb") as fe:
                procs.append(subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=env))
            logs.append(err)
    except BaseException:
        _worker._stop(procs)
        raise
    return procs, logs


def _failure(kind: type[Exception], what: str, logs: list[pathlib.Path]) -> Exception:
    tails = "\n".join(f"  stderr of process {j} (tail):\n{_worker._tail(log)}" for j, log in enumerate(logs))
    return kind(f"{what}; every process started was killed.\n{tails}")


def _results(workdir: pathlib.Path, phase: str, num_processes: int) -> list[dict[str, Any]]:
    import numpy as np

    out = []
    for pid in range(num_processes):
        with np.load(workdir / f"{phase}_result_{pid}.npz") as f:
            out.append({k: f[k] for k in f.files})
    return out


def launch_resume(
    workdir: Any, checkpoints: Any, *, num_processes: int, devices: int, timeout: float = 90.0
) -> list[dict[str, Any]]:
    """`resume` on `num_processes` x `devices`: each process's results."""
    workdir = pathlib.Path(workdir)
    procs, logs = _start(workdir, "resume", num_processes, devices, checkpoints)
    try:
        deadline = time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                raise _failure(RuntimeError, f"process {failed[0][0]} exited with code {failed[0][1]}", logs)
            if all(c == 0 for c in codes):
                break
            if time.monotonic() > deadline:
                raise _failure(TimeoutError, f"the resumed run did not finish within {timeout:.0f} s", logs)
            time.sleep(0.05)
    finally:
        _worker._stop(procs)
    return _results(workdir, "resume", num_processes)


def launch_first_and_kill(
    workdir: Any, checkpoints: Any, *, timeout: float = 90.0, grace: float = HEARTBEAT_S + 20.0
) -> dict[str, Any]:
    """`first_run` on 2 x 4; process `KILLED_PROCESS` killed (SIGKILL) while it writes step `KILLED_AT`.

    The kill comes when the process's own shard folder (`ocdbt.process_<i>`) appears in
    the step's temporary checkpoint directory, i.e. after the save began and while it
    writes `BIG` float32s per device. The other process is then left `grace` seconds to end
    by itself (it cannot finish the save without its peer) before it is killed too.

    Returns:
      `results` (each process's results of the uninterrupted run), `codes` (exit statuses:
      `-SIGKILL` for the killed one, None for one still running after `grace`), `kill_s`
      (seconds from the launch to the kill), `ended_s` (from the launch to each process's
      exit, None for one still running after `grace`) and `stderr` (each process's, whole).

    Raises:
      RuntimeError: when a process fails before the kill, or the save finished first.
      TimeoutError: when the save does not reach the kill within `timeout` seconds.
    """
    workdir, checkpoints = pathlib.Path(workdir), pathlib.Path(checkpoints)
    start = time.monotonic()
    procs, logs = _start(workdir, "first", 2, 4, checkpoints)
    partial = checkpoints / f"{KILLED_AT}.orbax-checkpoint-tmp*"  # orbax's temporary step directory
    pattern = str(partial / "**" / f"ocdbt.process_{KILLED_PROCESS}")
    try:
        while not glob.glob(pattern, recursive=True):
            codes = [p.poll() for p in procs]
            if any(c is not None for c in codes) or (checkpoints / str(KILLED_AT)).exists():
                raise _failure(
                    RuntimeError,
                    f"a process ended (exit codes {codes}) or step {KILLED_AT} was saved before the kill",
                    logs,
                )
            if time.monotonic() > start + timeout:
                raise _failure(TimeoutError, f"step {KILLED_AT} was not written within {timeout:.0f} s", logs)
            time.sleep(0.005)
        procs[KILLED_PROCESS].send_signal(signal.SIGKILL)
        kill_s = time.monotonic() - start
        until = time.monotonic() + grace
        ended: dict[int, float] = {}
        while len(ended) < len(procs) and time.monotonic() < until:
            for i, p in enumerate(procs):
                if i not in ended and p.poll() is not None:
                    ended[i] = time.monotonic() - start
            time.sleep(0.05)
        codes = [p.poll() for p in procs]
    finally:
        _worker._stop(procs)
    return {
        "results": _results(workdir, "first", 2),
        "codes": codes,
        "kill_s": kill_s,
        "ended_s": [ended.get(i) for i in range(len(procs))],
        "stderr": [log.read_text(errors="replace") for log in logs],
    }


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
