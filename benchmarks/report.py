"""`python -m benchmarks.report`: RESULTS.md and one chart per platform from `results/*.json`.

`benchmarks.run` calls it after measuring; run it alone to re-render without measuring.
The CPU section comes from `make bench` on the development machine; a GPU section appears
when `results/gpu.json` exists (the same `python -m benchmarks.run`, run on a GPU machine).
"""

from __future__ import annotations

import argparse
import json
import pathlib

import numpy as np

from benchmarks import catalogue, compat, depth, frontier, lowbit, pod, reasons, tracing

HERE = pathlib.Path(__file__).parent
ORDER = ["cpu", "gpu", "cuda", "rocm", "tpu"]


def _base_row(rows: dict) -> str:
    return next(name for name in rows if name.startswith("optax"))


def _ratio(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def _bytes(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:,.1f} MiB"


def _shown(metric: str, v: float) -> str:
    if metric == "bandwidth_fraction":
        return f"{v:.0%}"
    if metric == "bytes_per_param":
        return f"{v:.2f} B"
    if metric == "loss_ratio":
        return f"{v:.4f}"
    return f"{v:.0f}x" if metric.startswith("speedup") else f"{v:.2f}x"


def _value(t: dict) -> str:
    return "n/a" if t["value"] is None else _shown(t["metric"], t["value"])


def _goal(t: dict) -> str:
    if "goal" not in t:
        return ""
    if t["op"] == "within":
        return f"within {t['goal']:.0%} of 1"
    return f"{'≤' if t['op'] == '<=' else '≥'} {_shown(t['metric'], t['goal'])}"


def _reason(results: dict, t: dict) -> str:
    """The explanation of a miss, derived again from the stored rows (else the one stored with the target)."""
    w = next((w for w in results["workloads"] if w["name"] == t.get("workload")), None)
    text = reasons.explain(w, t) if w is not None else None
    return text or t.get("reason") or "no measured explanation recorded."


def targets_table(results: dict) -> list[str]:
    lines = ["| target | goal | measured | met |", "| --- | --- | --- | --- |"]
    for t in results["targets"]:
        lines.append(f"| {t['label']} | {_goal(t)} | {_value(t)} | {'yes' if t['met'] else '**no**'} |")
    missed = [t for t in results["targets"] if not t["met"]]
    if missed:
        lines += ["", "Missed, and why (from the measurements above):", ""]
        lines += [f"- *{t['label']}*: {_reason(results, t)}" for t in missed]
    return lines


def workload_table(w: dict, bandwidth: float) -> list[str]:
    rows = w["rows"]
    base = rows[_base_row(rows)]
    bandwidth = max((r["gbps"] for name, r in rows.items() if name.startswith("bw")), default=bandwidth)
    lines = [
        f"**{w['title']}** — {w['leaves']:,} leaves, {w['params']:,} parameters, "
        f"{w['bytes'] / 1e6:,.1f} MB touched per step by the math",
        "",
        "| contender | step min (ms) | median (ms) | vs optax | GB/s | of bandwidth | kernels | compile (s) "
        "| vs optax | peak memory | peak / (p+g+s) | what |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, r in rows.items():
        peak = "" if r["peak_ratio"] is None else f"{r['peak_ratio']:.3f}"
        lines.append(
            f"| {name} | {r['min_ms']:.3f} | {r['median_ms']:.3f} | {_ratio(r['min_ms'], base['min_ms'])} "
            f"| {r['gbps']:.1f} | {r['gbps'] / bandwidth:.0%} | {r['kernels']:,} | {r['compile_s']:.2f} "
            f"| {_ratio(r['compile_s'], base['compile_s'])} | {_bytes(r['peak_bytes'])} | {peak} "
            f"| {r['note']} |"
        )
    return lines


def _collectives(c: dict | str | None) -> str:
    if c is None:
        return "—"
    if isinstance(c, str):  # the step did not compile: the exception's class
        return f"fails ({c})"
    other = sum(v for k, v in c.items() if k not in ("all-gather", "all-reduce"))
    return f"{c['all-gather']} / {c['all-reduce']} / {other}"


def sharding_table(s: dict) -> list[str]:
    """Collectives per compiled step on the 2-D mesh: gradtx per leaf, gradtx packed, optax, on auto and
    explicit axes."""
    intro = (
        f"Under `jax.jit` with `NamedSharding` on a {s['mesh']}, a tree of {s['tree']}; the "
        "compiled, donated step's collective instructions as *all-gather / all-reduce / other* "
        "(reduce-scatter, collective-permute, all-to-all), on a mesh of auto axes and, under "
        "`jax.set_mesh`, on one of explicit axes (`AxisType.Explicit`). Run by "
        "`python -m benchmarks.sharding`."
    )
    lines = [
        intro,
        "",
        "| transform | gradtx (per leaf) | gradtx (packed parameters) | optax "
        "| gradtx, explicit axes | optax, explicit axes |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in s["transforms"].items():
        cells = [row[k] for k in ("gradtx", "gradtx packed", "optax", "gradtx explicit", "optax explicit")]
        lines.append(f"| {name} | " + " | ".join(_collectives(c) for c in cells) + " |")
    return lines


def state_bytes_table(s: dict) -> list[str]:
    """Bytes of the optimizer state per device on the 2-D mesh, and their ratio to the replicated state's."""
    intro = (
        "The optimizer state's bytes on each device (every device holds the same), for the tree above "
        "on the mesh of auto axes, as a jitted step returns it: initialised from replicated parameters; "
        "from the sharded ones (each state leaf sharded like its parameter); and with ZeRO "
        '(`gradtx.parallel.sharded_state(tx, "data", mesh=mesh)` under jit: each state leaf further '
        "split over `data`), from the sharded parameters and from replicated ones (plain data parallelism)."
    )
    lines = [
        intro,
        "",
        "| transform | replicated | gradtx, like params | optax, like params | gradtx ZeRO "
        "| gradtx ZeRO, params replicated |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in s["state_bytes"].items():
        full = row["replicated"]
        cells = [f"{full / 2**10:,.1f} KiB"] + [
            f"{row[k] / 2**10:,.1f} KiB ({row[k] / full:.2f}x)"
            for k in ("gradtx", "optax", "zero", "zero, params replicated")
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def zero_in_shard_map_table(z: dict) -> list[str]:
    """ZeRO-1 inside `shard_map`: the state per device beside one device's, and the step's collectives."""
    intro = (
        '`gradtx.parallel.sharded_state(tx, "data")` inside `jax.shard_map` over 8 devices, on '
        f"{z['tree']} (plain data parallelism): the optimizer state one device holds without ZeRO, and "
        "each device's share with it (the state `init` makes inside `shard_map`, 8 rows); the compiled "
        "step's collectives (*all-gather / all-reduce / other*), and the bytes of the whole arrays they "
        "combine (an all-reduce's or all-gather's result, a reduce-scatter's input). Adam, LAMB, "
        "Adafactor, CAME and SM3 run on each device's slices (the gradients reduce-scattered, the updates "
        "all-gathered; per-tensor norms and row and column statistics by small all-reduces); Muon and "
        "Shampoo need whole matrices (`gather_state=True`: the gradients all-reduced, the state gathered "
        "for the step, the matrix work split over the devices)."
    )
    lines = [
        intro,
        "",
        "| transform | state, one device | per device with ZeRO | collectives | bytes combined |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, row in z["rows"].items():
        full, mine = row["unsharded"], row["per_device"]
        label = f"{name} (`gather_state=True`)" if row["gather_state"] else name
        lines.append(
            f"| {label} | {full / 2**10:,.1f} KiB | {mine / 2**10:,.1f} KiB ({mine / full:.2f}x) | "
            f"{_collectives(row['collectives'])} | {row['collective_bytes'] / 2**20:,.2f} MiB |"
        )
    return lines


def platform_section(results: dict, chart: str | None) -> list[str]:
    m, bw = results["machine"], results["bandwidth"]
    v = m["versions"]
    title = "CPU" if m["platform"] == "cpu" else m["platform"].upper()
    where = f"{m['cpu']}, {m['cpu_count']} cores" if m["platform"] == "cpu" else m["device"]
    lines = [
        f"## {title}: {where}",
        "",
        f"Measured {m['date']} with `{results['command']}` ({results['rounds']} interleaved rounds); "
        f"gradtx {v['gradtx']}, jax {v['jax']}, jaxlib {v['jaxlib']}, optax {v['optax']}, "
        f"numpy {v['numpy']}, Python {m['python']}. Memory bandwidth, measured with donated in-place "
        f"kernels: {bw['best']:.1f} GB/s (scale {bw['scale']:.1f}, triad {bw['triad']:.1f}).",
        "",
        "### Targets",
        "",
        *targets_table(results),
        "",
    ]
    for w in results["workloads"]:
        lines += [f"### {w['name']}", "", *workload_table(w, w.get("bandwidth", bw["best"])), ""]
    if results.get("catalogue"):
        lines += ["### Every optimizer optax also has", "", *catalogue.table(results["catalogue"]), ""]
    if results.get("frontier"):
        lines += [
            "### Beyond optax: the frontier optimizers beside AdamW",
            "",
            *frontier.table(results["frontier"]),
            "",
        ]
    if results.get("lowbit"):
        lines += ["### Optimizer state in fewer bits", "", *lowbit.table(results["lowbit"]), ""]
    if results.get("compat"):
        what = (
            f"Every optax optimizer that builds from a learning rate alone, `gradtx.optax_compat`'s beside "
            f"optax's, on {results['compat']['tree']} (`benchmarks/compat.py`)."
        )
        lines += ["### optax_compat beside optax", "", *catalogue.table(results["compat"], what), ""]
    if results.get("programs"):
        lines += ["### An optax program, import switched", "", *compat.program_table(results["programs"]), ""]
    if results.get("tracing"):
        lines += ["### Tracing and lowering", "", *tracing.table(results["tracing"]["rows"]), ""]
    if results.get("depth"):
        lines += ["### Matrix optimizers at depth: trace and compile", "", *depth.table(results["depth"]), ""]
    if results.get("sharding"):
        lines += ["### Collectives per step on a 2-D mesh", "", *sharding_table(results["sharding"]), ""]
        lines += [
            "### Optimizer state per device on a 2-D mesh",
            "",
            *state_bytes_table(results["sharding"]),
            "",
        ]
        if results["sharding"].get("zero_in_shard_map"):
            lines += [
                "### ZeRO-1 inside shard_map",
                "",
                *zero_in_shard_map_table(results["sharding"]["zero_in_shard_map"]),
                "",
            ]
        if results["sharding"].get("matrix_work"):
            lines += ["### Matrix work on a pod", "", *pod.table(results["sharding"]["matrix_work"]), ""]
    if chart:
        lines += [f"![{title} results]({chart})", ""]
    return lines


WHO = [
    "gradtx",
    "gradtx packed",
    "jnp",
]  # the bars of the chart: each workload's row of that name (or prefix)


def _first(rows: dict, who: str) -> dict | None:
    return rows.get(who) or next((r for name, r in rows.items() if name.startswith(who)), None)


def _chart_ratio(row: dict, base: dict, key: str) -> float:
    """A row's `key` over optax's: for step times the median of the per-round ratios (what the targets
    judge)."""
    if key == "rounds_ms":
        return float(np.median(np.asarray(row[key]) / np.asarray(base[key])))
    return row[key] / base[key]


def chart(results: dict, path: pathlib.Path) -> None:
    """Step and compile time per workload relative to optax (targets marked), and GB/s against the
    bandwidth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    workloads = results["workloads"]
    names = [w["name"] for w in workloads]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    panels = [
        (axes[0], "rounds_ms", "step_ratio", "step time / optax's (median per-round ratio)"),
        (axes[1], "compile_s", "compile_ratio", "compile time / optax's"),
    ]
    for ax, key, metric, label in panels:
        for j, who in enumerate(WHO):
            vals = []
            for w in workloads:
                row, base = _first(w["rows"], who), w["rows"][_base_row(w["rows"])]
                vals.append(float("nan") if row is None else _chart_ratio(row, base, key))
            ax.bar([i + 0.27 * j for i in range(len(names))], vals, width=0.27, label=who)
        for i, w in enumerate(workloads):
            for t in w["targets"]:
                if t["metric"] == metric and t.get("a") in WHO:
                    j = WHO.index(t["a"])
                    ax.plot(
                        [i + 0.27 * j - 0.13, i + 0.27 * j + 0.13],
                        [t["goal"]] * 2,
                        color="red",
                        lw=2,
                        label="target" if "target" not in ax.get_legend_handles_labels()[1] else None,
                    )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_xticks([i + 0.27 for i in range(len(names))], names, rotation=20)
        ax.set_title(label + " (lower is better)")
        ax.legend(fontsize=8)
    # GB/s of a sparse step, or of a step that also runs a model, is not a bandwidth figure
    dense = [w for w in workloads if w["name"] != "sparse" and w.get("optimizer_only", True)]
    for j, who in enumerate(["gradtx", "gradtx packed", "optax", "jnp"]):
        vals = [(_first(w["rows"], who) or {"gbps": 0.0})["gbps"] for w in dense]
        axes[2].bar([i + 0.2 * j for i in range(len(dense))], vals, width=0.2, label=who)
    bw = results["bandwidth"]["best"]
    axes[2].axhline(bw, color="k", ls="--", lw=0.8, label=f"bandwidth probe {bw:.0f} GB/s")
    axes[2].set_xticks([i + 0.3 for i in range(len(dense))], [w["name"] for w in dense], rotation=20)
    axes[2].set_title("GB/s: bytes the math must touch / step time")
    axes[2].legend(fontsize=8)
    m = results["machine"]
    where = f"{m['cpu']}, {m['cpu_count']} cores" if m["platform"] == "cpu" else m["device"]
    fig.suptitle(f"gradtx vs optax: {m['platform'].upper()}, {where} ({m['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


HEADER = """# gradtx benchmarks

gradtx beside optax, in the same process, on the same arrays: every workload's contenders
(gradtx, optax, and a hand-written jnp version as the floor) are compiled, then run in
interleaved rounds with params and state donated; the tables keep the minimum and the
median step time over the rounds. *GB/s* is the bytes the math must touch (Adam: read
params, gradients and both moments, write params and moments: 28 bytes per float32
parameter; a global-norm clip adds one read of the gradients) divided by the minimum step
time; *of bandwidth* compares it with the bandwidth probe (the `bw` row: a kernel with no
real math, run in the same rounds) or, for workloads without one, with the probe run at
the start; *kernels* counts the operations of the compiled step that run (fusions,
copies, sorts, ...). The targets use the median over rounds of the per-round ratio (each
round runs every contender back to back, so the machine's drifts cancel), judged at the
precision shown; the tables' *vs optax* and *of bandwidth* use the minimums. *Compile* is the first call
(trace, lower, compile, run once). *Peak memory* is XLA's buffer assignment for the step
(arguments + outputs - donated aliases + temporaries), against params + gradients + state.

Rows named *gradtx* run the aliases leaf by leaf, as optax does (the default); *gradtx
packed* runs the same alias on packed parameters (`gradtx.packing`: the leaves kept in a
few buffers, the gradients arriving packed). The `train_step` workload times a whole step
(forward, backward and update) of a model with many small leaves; its peak memory holds the
activations, so the memory target leaves it out. The last two tables count the collectives of
a step under `jax.jit` with shardings on a 2-D mesh of 8 CPU devices, and the bytes of the
optimizer state each device holds (`benchmarks/sharding.py`).

Regenerate with `make bench` (CPU; rewrites `results/cpu.json`, this file and the charts).
The code is in `benchmarks/`: `workloads.py` (workloads and targets), `trees.py`, `contenders.py`,
`_timing.py` (how it measures), `run.py`, `sharding.py`, `report.py`.
"""


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "RESULTS.md")
    parser.add_argument("--charts", type=pathlib.Path, help="where the PNGs go (default: the results folder)")
    args = parser.parse_args(argv)
    charts = args.charts or args.results
    found = {p.stem: json.loads(p.read_text()) for p in args.results.glob("*.json")}
    lines = [HEADER]
    for name in sorted(found, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n)):
        chart(found[name], charts / f"{name}.png")
        lines += platform_section(
            found[name], f"{args.results.name}/{name}.png"
        )  # as linked from benchmarks/
    text = "\n".join(lines).rstrip() + "\n"
    args.out.write_text(text)
    return text


if __name__ == "__main__":
    main()
