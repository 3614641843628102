"""Trace and compile time at depth: the matrix optimizers beside AdamW on a deep tree.

A matrix optimizer's step does work per matrix (Newton-Schulz iterations, statistics, roots, bases,
Kronecker factors); traced one matrix at a time, a deep model's step becomes a long program (a user of
google-research/precondition reports 284 s of tracing for Shampoo without flattening). Each optimizer's
jitted step is traced, lowered and compiled from abstract arguments (`jax.ShapeDtypeStruct`) on a tree
of `layers` layers (an attention matrix, an MLP's two matrices, a bias), a fresh function each time,
AdamW and the optimizer in alternation; the ratio is the median over repetitions of the optimizer's
seconds over AdamW's in the same repetition.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import gradtx

GOAL = 2.0
"""A matrix optimizer's trace + lower + compile time over AdamW's on the same tree, at most."""

CONTENDERS: dict[str, Callable[[], Any]] = {
    "muon": lambda: gradtx.muon(0.02),
    "shampoo": lambda: gradtx.shampoo(0.01),
    "soap": lambda: gradtx.soap(0.003),
    "psgd_kron": lambda: gradtx.psgd_kron(0.001),
}
SIZES = {"full": (96, 64, 3, tuple(CONTENDERS)), "smoke": (2, 8, 1, ("muon",))}
"""`measure`'s arguments: layers, width, repetitions, contenders (the suite's smoke run: Muon's path)."""


def tree(layers: int, width: int) -> dict[str, Any]:
    """`layers` layers of an attention matrix (width x width), an MLP (width x 4 width, 4 width x width)
    and a bias, as abstract float32 arrays."""
    shapes = {"attn": (width, width), "up": (width, 4 * width), "down": (4 * width, width), "bias": (width,)}
    return {
        f"layer{i:03d}": {k: jax.ShapeDtypeStruct(s, jnp.float32) for k, s in shapes.items()}
        for i in range(layers)
    }


def _seconds(tx: Any, params: Any) -> float:
    """Trace, lower and compile one fresh `(params, state, grads) -> (params, state)` step of `tx`."""
    state = jax.eval_shape(tx.init, params)

    def step(p, s, g):  # a new function each time: no cached trace
        updates, s = tx.update(g, s, p)
        return gradtx.apply_updates(p, updates), s

    gc.collect()
    start = time.perf_counter()
    jax.jit(step).trace(params, state, params).lower().compile()
    return time.perf_counter() - start


def measure(layers: int, width: int, repeats: int, optimizers: tuple[str, ...]) -> dict[str, Any]:
    """One row per contender of `optimizers`: its best and median seconds, AdamW's median, the paired
    median ratio."""
    params = tree(layers, width)
    adamw = gradtx.adamw(1e-3, weight_decay=1e-4)
    _seconds(adamw, params)  # warm JAX's own caches (primitive rules, lowering tables)
    rows = []
    for name in optimizers:
        tx = CONTENDERS[name]()
        _seconds(tx, params)
        mine, base = [], []
        for i in range(repeats):
            pair = [(mine, tx), (base, adamw)]
            for times, t in pair if i % 2 == 0 else reversed(pair):
                times.append(_seconds(t, params))
        m, b = np.asarray(mine), np.asarray(base)
        rows.append(
            {
                "optimizer": name,
                "min_s": float(m.min()),
                "median_s": float(np.median(m)),
                "adamw_median_s": float(np.median(b)),
                "ratio": float(np.median(m / b)),
            }
        )
    return {"layers": layers, "width": width, "leaves": 4 * layers, "rows": rows}


def targets(result: dict[str, Any]) -> list[dict]:
    """One target per contender: trace + lower + compile, over AdamW's, <= GOAL."""
    out = []
    for r in result["rows"]:
        shown = round(r["ratio"], 2)
        out.append(
            {
                "label": f"trace + compile at depth, {result['layers']} layers, {r['optimizer']} / adamw",
                "metric": "depth_compile_ratio",
                "op": "<=",
                "goal": GOAL,
                "workload": "depth",
                "value": r["ratio"],
                "met": bool(shown <= GOAL),
                "reason": None
                if shown <= GOAL
                else f"{r['median_s']:.1f} s against AdamW's {r['adamw_median_s']:.1f} s (medians)",
            }
        )
    return out


def table(result: dict[str, Any]) -> list[str]:
    """The Markdown table of `measure`'s result."""
    w = result["width"]
    lines = [
        f"The jitted step (trace, lower, compile) on {result['layers']} layers of a {w}x{w}, a {w}x{4 * w} "
        f"and a {4 * w}x{w} matrix and a bias ({result['leaves']} leaves), beside AdamW's on the same tree "
        "(paired, median ratio). Run by `python -m benchmarks.run --only depth`.",
        "",
        "| optimizer | seconds (min) | seconds (median) | AdamW (median) | / AdamW |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['optimizer']} | {r['min_s']:.2f} | {r['median_s']:.2f} | {r['adamw_median_s']:.2f} | "
            f"{r['ratio']:.2f}x |"
        )
    return lines
