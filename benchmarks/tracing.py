"""Tracing and lowering an Adam step over many leaves: gradtx beside optax, the Python cost of a step.

On a tree of many small leaves, a jitted step's first call is mostly Python: tracing the
update (every leaf's formula, every wrapper's checks) and lowering the jaxpr. gradtx's
checks run once at the outermost factory and its scalars are combined once per step, not
per leaf, so it should trace in less time than optax. Each repetition traces a fresh
function (JAX caches traces by function), on abstract arguments (`jax.ShapeDtypeStruct`:
nothing is transferred), gradtx and optax in alternation; the ratio is the median over
repetitions of gradtx's time over optax's in the same repetition.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import gradtx

GOAL = 0.9
"""gradtx's trace + lower time over optax's, at most."""

CASES = [(1000, (4, 4)), (1000, (4,)), (2000, (4, 4)), (2000, (4,))]
SMOKE_CASES = [(20, (4, 4))]


def _seconds(tx: Any, apply: Callable[[Any, Any], Any], params: Any) -> float:
    """Trace and lower one fresh `(params, state, grads) -> (params, state)` step of `tx`."""
    state = jax.eval_shape(tx.init, params)

    def step(p, s, g):  # a new function each time: no cached trace
        updates, s = tx.update(g, s, p)
        return apply(p, updates), s

    gc.collect()
    start = time.perf_counter()
    jax.jit(step).trace(params, state, params).lower()
    return time.perf_counter() - start


def measure(cases: list[tuple[int, tuple[int, ...]]], repeats: int) -> list[dict]:
    """One row per case: gradtx's and optax's best and median seconds, and the paired median ratio."""
    rows = []
    for leaves, shape in cases:
        params = {f"p{i:05d}": jax.ShapeDtypeStruct(shape, jnp.float32) for i in range(leaves)}
        txs = {
            "gradtx": (gradtx.adam(1e-3), gradtx.apply_updates),
            "optax": (optax.adam(1e-3), optax.apply_updates),
        }
        for tx, apply in txs.values():  # warm JAX's own caches (primitive rules, lowering tables)
            _seconds(tx, apply, params)
        times: dict[str, list[float]] = {name: [] for name in txs}
        for i in range(repeats):
            order = list(txs) if i % 2 == 0 else list(reversed(txs))
            for name in order:
                times[name].append(_seconds(*txs[name], params))
        g, o = np.asarray(times["gradtx"]), np.asarray(times["optax"])
        rows.append(
            {
                "leaves": leaves,
                "shape": list(shape),
                "gradtx_min_s": float(g.min()),
                "gradtx_median_s": float(np.median(g)),
                "optax_min_s": float(o.min()),
                "optax_median_s": float(np.median(o)),
                "ratio": float(np.median(g / o)),
            }
        )
    return rows


def targets(rows: list[dict]) -> list[dict]:
    """One target per case: trace + lower, gradtx / optax <= GOAL."""
    out = []
    for r in rows:
        shown = round(r["ratio"], 2)
        out.append(
            {
                "label": (
                    f"trace + lower an adam step, {r['leaves']:,} leaves of {tuple(r['shape'])}: "
                    "gradtx / optax"
                ),
                "metric": "trace_ratio",
                "op": "<=",
                "goal": GOAL,
                "workload": "tracing",
                "value": r["ratio"],
                "met": bool(shown <= GOAL),
                "reason": None
                if shown <= GOAL
                else (
                    f"gradtx {r['gradtx_median_s'] * 1e3:.0f} ms, optax {r['optax_median_s'] * 1e3:.0f} ms "
                    "(medians); most of either is JAX's own per-argument and per-equation cost, which both "
                    "pay alike."
                ),
            }
        )
    return out


def table(rows: list[dict]) -> list[str]:
    lines = [
        "Tracing and lowering a jitted adam step (update and `apply_updates`) on abstract arguments, a fresh "
        "function each time, gradtx and optax alternating (`benchmarks/tracing.py`).",
        "",
        "| leaves | shape | gradtx best (ms) | median (ms) | optax best (ms) | median (ms) "
        "| gradtx / optax |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['leaves']:,} | {tuple(r['shape'])} | {r['gradtx_min_s'] * 1e3:.0f} "
            f"| {r['gradtx_median_s'] * 1e3:.0f} | {r['optax_min_s'] * 1e3:.0f} "
            f"| {r['optax_median_s'] * 1e3:.0f} "
            f"| {r['ratio']:.2f}x |"
        )
    return lines
