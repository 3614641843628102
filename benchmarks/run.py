"""Measure every workload, gradtx beside optax and hand-written jnp in one process, and write the results.

    python -m benchmarks.run                 # `make bench`: results/<platform>.json, then the report
    python -m benchmarks.run --only sparse   # one workload (the others keep their last results)
    python -m benchmarks.run --only catalogue tracing   # the per-optimizer table, the trace-time table
    python -m benchmarks.run --sizes smoke --json /tmp/r.json --no-report   # seconds: this package's test

It also runs every optimizer optax also has beside optax's on a transformer-like tree
(`benchmarks.catalogue`: step and compile time), the optimizers optax does not have beside its AdamW
(`benchmarks.frontier`: step time and state bytes), AdamW with its state in 8 and 4 bits and bfloat16
(`benchmarks.lowbit`: bytes, step time and memory, and a 2,000-step LM trained with each), times
tracing and lowering an Adam step over thousands of leaves (`benchmarks.tracing`), times compiling the
matrix optimizers' steps on a deep tree beside AdamW's (`benchmarks.depth`), and counts the collectives of
a few optimizers' steps on a 2-D mesh of 8 devices (`benchmarks.sharding`, in a process of its own).

For each workload every contender is compiled (its first call is the compile time), then
all contenders run in interleaved rounds; a round runs enough back-to-back steps of one
contender to last `--min-round-ms`, and the table keeps the minimum and the median of the
per-step times over the rounds. Params and state are donated, as in a training loop.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
from typing import Any

import jax
import numpy as np
import optax

import gradtx
from benchmarks import _timing, catalogue, compat, depth, frontier, lowbit, reasons, tracing, workloads

SUITES = ("catalogue", "compat", "depth", "frontier", "lowbit", "programs", "tracing")
"""What runs besides the workloads (`--only` names them too)."""

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
MEMORY_GOAL = 1.10


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def machine() -> dict[str, Any]:
    """What ran the benchmarks: device, processor, versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    device = jax.devices()[0]
    return {
        "platform": jax.default_backend(),
        "device": getattr(device, "device_kind", str(device)),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "versions": {
            "gradtx": gradtx.__version__,
            "jax": jax.__version__,
            "jaxlib": _version("jaxlib"),
            "optax": optax.__version__,
            "numpy": np.__version__,
        },
        "date": datetime.date.today().isoformat(),
    }


def measure(
    workload: workloads.Workload, bandwidth: float, rounds: int, min_round_s: float
) -> dict[str, Any]:
    """The rows of one workload: per contender, step and compile times, GB/s and memory."""
    runners = [_timing.Runner(c, workload.params, workload.grads) for c in workload.contenders]
    samples = _timing.interleaved(runners, rounds, min_round_s)
    timed = [(r, r.contender.name) for r in runners]
    for a, b in workload.after:  # one step of b right after each step of a
        first, second = (next(r for r in runners if r.contender.name == n) for n in (a, b))
        samples[f"{b}, right after {a}"] = _timing.right_after(first, second, max(rounds, 5) * 4)
        timed.append((second, f"{b}, right after {a}"))
    rows = {}
    for r, name in timed:
        c, times = r.contender, np.asarray(samples[name])
        touched = c.bytes if c.bytes is not None else workload.bytes
        gbps = touched / times.min() / 1e9
        rows[name] = {
            "note": c.note
            if name == c.name
            else f"each step timed right after {name.split(', right after ')[1]}",
            "bytes": touched,
            "min_ms": float(times.min() * 1e3),
            "median_ms": float(np.median(times) * 1e3),
            "compile_s": r.compile_s,
            "gbps": gbps,
            "kernels": r.kernels,
            "rounds_ms": [float(t * 1e3) for t in times],
            "live_bytes": r.live_bytes,
            "peak_bytes": r.peak_bytes,
            "temp_bytes": r.temp_bytes,
            "peak_ratio": None if r.peak_bytes is None else r.peak_bytes / r.live_bytes,
            "own_memory": c.own_memory,
        }
    del runners
    gc.collect()
    result = {
        "name": workload.name,
        "title": workload.title,
        "bytes": workload.bytes,
        "optimizer_only": workload.optimizer_only,
        "leaves": len(jax.tree.leaves(workload.params)),
        "params": int(sum(x.size for x in jax.tree.leaves(workload.params))),
        "rows": rows,
    }
    result["targets"] = [evaluate(t, result, bandwidth) for t in workload.targets]
    return result


def paired_ratio(a: dict, b: dict) -> float:
    """The median over rounds of `a`'s step time over `b`'s in the same round (drifts of the machine
    cancel)."""
    return _timing.median_ratio(a["rounds_ms"], b["rounds_ms"])


def evaluate(target: dict, workload: dict, bandwidth: float) -> dict:
    """`target` with its measured `value`, whether it is `met`, and for a miss the measured `reason`."""
    metric, a, b, rows = target["metric"], target["a"], target.get("b"), workload["rows"]
    if metric in ("step_ratio", "speedup"):
        value = paired_ratio(rows[a], rows[b])
    elif metric == "speedup_median":  # samples not taken in the same rounds
        value = rows[a]["median_ms"] / rows[b]["median_ms"]
    elif metric == "compile_ratio":
        value = rows[a]["compile_s"] / rows[b]["compile_s"]
    elif metric == "peak_ratio":
        value = rows[a]["peak_ratio"]
    elif metric == "bandwidth_fraction":
        probe = next((r for name, r in rows.items() if name.startswith("bw")), None)
        if probe is None:
            value = rows[a]["gbps"] / bandwidth
        else:  # per round: the contender's GB/s over the probe's, the median over rounds
            value = paired_ratio(probe, rows[a]) * rows[a]["bytes"] / probe["bytes"]
    else:
        raise ValueError(f"benchmarks: unknown target metric {metric!r}")
    shown = round(value, 2)  # judged at the precision the table shows
    met = shown <= target["goal"] if target["op"] == "<=" else shown >= target["goal"]
    reason = None if met else reasons.explain(workload, target)
    return {**target, "workload": workload["name"], "value": value, "met": bool(met), "reason": reason}


def memory_target(results: list[dict]) -> dict:
    """Peak memory of every gradtx step (XLA's buffer assignment) against params + grads + state."""
    worst = max(
        (
            (w, name, row["peak_ratio"])
            for w in results
            if w.get("optimizer_only", True)
            for name, row in w["rows"].items()
            if name.startswith("gradtx") and row["peak_ratio"] is not None and not row.get("own_memory")
        ),
        key=lambda x: x[2],
        default=None,
    )
    if worst is None:
        return {
            "label": "peak memory of a donated gradtx step",
            "metric": "peak_ratio",
            "value": None,
            "met": False,
            "reason": "this backend reports no memory analysis",
        }
    met = round(worst[2], 2) <= MEMORY_GOAL
    return {
        "label": f"peak memory of a donated gradtx step / (params + grads + state), worst: "
        f"{worst[0]['name']} ({worst[1]})",
        "metric": "peak_ratio",
        "op": "<=",
        "goal": MEMORY_GOAL,
        "workload": worst[0]["name"],
        "value": worst[2],
        "met": met,
        "reason": None if met else reasons.explain(worst[0], {"metric": "peak_ratio", "a": worst[1]}),
    }


def sharding(sizes: str) -> dict:
    """Collectives per step on a 2-D mesh (`benchmarks.sharding`, in its own process: it needs 8 devices)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "sharding.json"
        subprocess.run(
            [sys.executable, "-m", "benchmarks.sharding", "--sizes", sizes, "--json", str(path)],
            check=True,
            cwd=pathlib.Path(__file__).parent.parent,
            timeout=1800,  # the pod table times four matrix optimizers on 8 simulated devices
        )
        return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", choices=["full", "smoke"], default="full")
    parser.add_argument(
        "--only", nargs="+", choices=sorted([*workloads.ALL, *SUITES]), help="run these workloads only"
    )
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--min-round-ms", type=float, default=100.0)
    parser.add_argument("--json", type=pathlib.Path, help="where to write (default: results/<platform>.json)")
    parser.add_argument(
        "--no-report", action="store_true", help="do not regenerate RESULTS.md and the charts"
    )
    parser.add_argument(
        "--no-sharding",
        action="store_true",
        help="do not count collectives on the 2-D mesh (keep the last counts)",
    )
    args = parser.parse_args(argv)
    sizes = workloads.FULL if args.sizes == "full" else workloads.SMOKE
    info = machine()
    path = args.json or RESULTS_DIR / f"{info['platform']}.json"
    previous = json.loads(path.read_text()) if args.only and path.exists() else {"workloads": []}

    bandwidth = _timing.memory_bandwidth(sizes.bandwidth_elems)
    print(
        f"{info['device']} ({info['cpu_count']} CPUs): measured bandwidth {bandwidth['best']:.1f} GB/s",
        flush=True,
    )
    results = [w for w in previous["workloads"] if args.only and w["name"] not in args.only]
    for w in results:  # a workload kept from the last run keeps the bandwidth measured beside it
        w.setdefault("bandwidth", previous["bandwidth"]["best"])
    for name in workloads.ALL:
        if args.only and name not in args.only:
            continue
        result = measure(workloads.ALL[name](sizes), bandwidth["best"], args.rounds, args.min_round_ms / 1e3)
        result["bandwidth"] = bandwidth["best"]
        results.append(result)
        for row_name, row in result["rows"].items():
            print(
                f"  {name:15s} {row_name:22s} {row['min_ms']:9.3f} ms (median {row['median_ms']:9.3f})"
                f"  compile {row['compile_s']:6.2f} s  {row['gbps']:7.1f} GB/s",
                flush=True,
            )
    results.sort(key=lambda w: list(workloads.ALL).index(w["name"]))
    smoke = args.sizes == "smoke"
    suites = {name: previous.get(name) for name in SUITES}
    if not args.only or "catalogue" in args.only:
        suites["catalogue"] = catalogue.measure(
            sizes.d_model,
            sizes.layers,
            sizes.vocab,
            args.rounds,
            args.min_round_ms / 1e3,
            compiles=1 if smoke else 5,
            only=list(catalogue.PAIRS)[:3] if smoke else None,
        )
    if not args.only or "compat" in args.only:
        compat_pairs = compat.pairs()
        suites["compat"] = catalogue.measure(
            sizes.d_model,
            sizes.layers,
            sizes.vocab,
            args.rounds,
            args.min_round_ms / 1e3,
            compiles=1 if smoke else 3,  # 46 pairs: fewer fresh compiles than the catalogue's 5
            only=list(compat_pairs)[:2] if smoke else None,
            pairs=compat_pairs,
            label="optax_compat",
        )
    if not args.only or "frontier" in args.only:
        suites["frontier"] = frontier.measure(
            *((sizes.d_model, sizes.layers, sizes.vocab) if smoke else frontier.TREE),
            args.rounds,
            args.min_round_ms / 1e3,
            only=list(frontier.CONTENDERS)[:3] if smoke else None,
        )
    if not args.only or "lowbit" in args.only:
        suites["lowbit"] = lowbit.measure(
            *((sizes.d_model, sizes.layers, sizes.vocab) if smoke else lowbit.TREE),
            args.rounds,
            args.min_round_ms / 1e3,
            only=["adamw, 8bit"] if smoke else None,
        )
        suites["lowbit"]["convergence"] = lowbit.convergence(
            steps=5 if smoke else 2000,
            eval_batches=2 if smoke else 20,
            only=["adamw, 8bit"] if smoke else None,
        )
    if not args.only or "programs" in args.only:
        suites["programs"] = compat.measure_programs(repeats=1 if smoke else 3)
    if not args.only or "tracing" in args.only:
        rows = tracing.measure(tracing.SMOKE_CASES if smoke else tracing.CASES, repeats=2 if smoke else 9)
        suites["tracing"] = {"rows": rows}
        for r in rows:
            print(f"  tracing {r['leaves']} leaves of {tuple(r['shape'])}: {r['ratio']:.2f}x", flush=True)
    if not args.only or "depth" in args.only:
        suites["depth"] = depth.measure(*depth.SIZES[args.sizes])
        for r in suites["depth"]["rows"]:
            print(f"  depth {r['optimizer']}: {r['median_s']:.2f} s, {r['ratio']:.2f}x AdamW's", flush=True)
    targets = [t for w in results for t in w["targets"]] + [memory_target(results)]
    if suites["catalogue"]:
        targets += catalogue.targets(suites["catalogue"])
    if suites["compat"]:
        targets += catalogue.targets(suites["compat"], label="optax_compat")
    if suites["lowbit"]:
        targets += lowbit.targets(suites["lowbit"])
    if suites["programs"]:
        targets += compat.program_targets(suites["programs"])
    if suites["tracing"]:
        targets += tracing.targets(suites["tracing"]["rows"])
    if suites["depth"]:
        targets += depth.targets(suites["depth"])
    command = "python -m benchmarks.run " + " ".join(argv if argv is not None else sys.argv[1:])
    out = {
        "machine": info,
        "command": command.strip(),
        "sizes": args.sizes,
        "rounds": args.rounds,
        "bandwidth": bandwidth,
        "workloads": results,
        "targets": targets,
        "sharding": previous.get("sharding") if args.no_sharding else sharding(args.sizes),
        **suites,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    for t in targets:
        print(f"{'met ' if t['met'] else 'MISS'} {t['label']}: {t['value']}", flush=True)
    if not args.no_report:
        from benchmarks import report

        report.main([])
    return out


if __name__ == "__main__":
    main()
