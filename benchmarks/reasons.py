"""Why a target was missed, in numbers taken from the measurements (a workload's rows in the results).

`explain(workload, target)` returns the text for a missed target, or None when nothing is
known; `benchmarks.run` stores it and `benchmarks.report` derives it again when rendering.
"""

from __future__ import annotations

from typing import Callable


def big_adam_step(w: dict, a: str) -> str:
    rows = w["rows"]
    times = ", ".join(f"{name} {rows[name]['min_ms']:.2f} ms" for name in ("gradtx", "optax", "jnp"))
    kernels = ", ".join(f"{name} {rows[name]['kernels']}" for name in ("gradtx", "optax", "jnp"))
    return (
        f"the fastest steps were {times}, and the per-round ratio moves by several percent from round "
        f"to round on this machine. The compiled steps ({kernels} kernels) run the same three loops "
        "over the leaf (first moment, second moment, params: XLA:CPU compiles all three Adams that way); "
        "the rest are scalar kernels (gradtx's include TF's beta-power accumulators). A difference of a "
        "percent or two between them is code placement and noise, not memory traffic gradtx could remove."
    )


def big_adam_bandwidth(w: dict, a: str) -> str:
    rows = w["rows"]
    return (
        f"a kernel with Adam's memory traffic and no real math reaches {rows['bw adam-shaped']['gbps']:.1f} "
        f"GB/s; the hand-written jnp Adam reaches {rows['jnp']['gbps']:.1f} GB/s and optax "
        f"{rows['optax']['gbps']:.1f} GB/s, about what gradtx reaches ({rows['gradtx']['gbps']:.1f}). The "
        "difference is arithmetic (a square root and a division per element) that this device's cores "
        "do not hide behind the memory traffic."
    )


def per_leaf_step(w: dict, a: str) -> str:
    rows = w["rows"]
    ours, theirs = rows[a], next(r for name, r in rows.items() if name.startswith("optax"))
    floor = rows.get("jnp")
    text = (
        f"the per-leaf step took {ours['min_ms']:.2f} ms in {ours['kernels']:,} kernels, optax's "
        f"{theirs['min_ms']:.2f} ms in {theirs['kernels']:,}"
    )
    if floor is not None:
        text += (
            f", and a hand-written jnp version of the same math {floor['min_ms']:.2f} ms "
            f"in {floor['kernels']:,}"
        )
    return (
        text + ". Leaf by leaf, every library writes each output leaf in its own kernel; the rounds "
        "of this machine move by several percent, more than the difference between the three."
    )


def packed_step(w: dict, a: str) -> str:
    rows = w["rows"]
    ours, theirs = rows[a], rows["optax"]
    floor = rows.get("gradtx packed sgd")
    if floor is not None:  # a whole train step: the model's own forward and backward bound it
        return (
            f"the model's own work (forward, backward and a bare SGD step on the packed buffer, the "
            f"`gradtx packed sgd` row) takes {floor['min_ms']:.2f} ms = "
            f"{floor['min_ms'] / theirs['min_ms']:.2f}x "
            f"optax's whole step; the packed Adam step takes {ours['min_ms']:.2f} ms, "
            f"{ours['min_ms'] - floor['min_ms']:.2f} ms above that floor."
        )
    return (
        f"the packed step is {ours['kernels']} kernels over one buffer at {ours['gbps']:.1f} GB/s "
        f"({ours['min_ms']:.2f} ms); optax's {theirs['kernels']:,} kernels take {theirs['min_ms']:.2f} ms."
    )


def packed_state_step(w: dict, a: str) -> str:
    rows = w["rows"]
    ours, theirs, floor = rows[a], rows["optax"], rows["jnp sgd"]
    return (
        f"the params stay leaf by leaf, so the step keeps one addition kernel per leaf: a bare SGD step "
        f"written by hand (the `jnp sgd` row, {floor['kernels']:,} kernels) takes {floor['min_ms']:.2f} ms = "
        f"{floor['min_ms'] / theirs['min_ms']:.2f}x optax's Adam step; with Adam's state packed the step "
        f"takes {ours['min_ms']:.2f} ms ({ours['kernels']:,} kernels), the packing of the gradients included."
    )


def compile_ratio(w: dict, a: str) -> str:
    rows = w["rows"]
    ours, theirs = rows[a], rows["optax"]
    return (
        f"compiling took {ours['compile_s']:.2f} s for {ours['kernels']:,} kernels against optax's "
        f"{theirs['compile_s']:.2f} s for {theirs['kernels']:,}; XLA compiles and schedules each kernel, "
        "and the views of packed leaves share one kernel per leaf shape (runtime offsets)."
    )


def peak_memory(w: dict, a: str) -> str:
    r = w["rows"][a]
    return (
        f"the step holds a temporary of {r['temp_bytes'] / 2**20:.1f} MiB on top of "
        f"{r['live_bytes'] / 2**20:.1f} MiB of params + grads + state."
    )


def sparse_speedup(w: dict, a: str) -> str:
    rows = w["rows"]
    dense, ours, floor = (
        rows[n]["min_ms"] for n in ("gradtx adam (dense)", "gradtx lazy_adam", "jnp lazy_adam")
    )
    return (
        f"the hand-written floor (gather, update, scatter on rows known to be unique) takes {floor:.3f} ms, "
        f"{dense / floor:.0f}x faster than dense; gradtx adds TF's deduplication of the indices (a sort of "
        f"the int32 row keys, and a segment sum only when a row repeats), {ours - floor:.3f} ms. Steps this "
        "small are a few dozen XLA:CPU kernels each, and their time moves with this machine's load from run "
        "to run more than the dense step's does."
    )


def sparse_speedup_cold(w: dict, a: str) -> str:
    rows = w["rows"]
    dense = rows["gradtx adam (dense)"]["median_ms"]
    ours = rows["gradtx lazy_adam, right after gradtx adam (dense)"]["median_ms"]
    floor = rows["jnp lazy_adam, right after gradtx adam (dense)"]["median_ms"]
    warm = rows["gradtx lazy_adam"]["median_ms"]
    return (
        f"right after a dense step (medians) the hand-written floor takes {floor:.3f} ms, "
        f"{dense / floor:.0f}x faster than dense, gradtx {ours:.3f} ms; back to back gradtx takes {warm:.3f} "
        "ms. The dense step streams three 64 MiB tables through the caches, so the touched rows (and the "
        "step's code) come from memory again, and a single step is also timed with its dispatch, which "
        "back-to-back steps overlap."
    )


WHY: dict[tuple[str, str], Callable[[dict, str], str]] = {
    ("big_adam", "step_ratio"): big_adam_step,
    ("big_adam", "bandwidth_fraction"): big_adam_bandwidth,
    ("sparse", "speedup"): sparse_speedup,
    ("sparse", "speedup_median"): sparse_speedup_cold,
}


def explain(workload: dict, target: dict) -> str | None:
    """The measured explanation of a missed `target` (metric and contender `a`) of `workload`, if one is
    known."""
    metric, a = target["metric"], target.get("a", "gradtx")
    fn = WHY.get((workload["name"], metric))
    if fn is None:
        packed = "packed" in a
        fn = {
            "step_ratio": packed_state_step
            if a.endswith("packed(tx)")
            else packed_step
            if packed
            else per_leaf_step,
            "compile_ratio": compile_ratio,
            "peak_ratio": peak_memory,
        }.get(metric)
    try:
        return None if fn is None else fn(workload, a)
    except KeyError:  # results from an older version of the workload
        return None
