"""The optimizers optax does not have, beside AdamW, on the transformer-like tree: step time, compile time and
state bytes.

Each runs its reference's default configuration at one learning rate (`gradtx.get(<PyTorch class>, lr=...)`
where it has one), on the catalogue's tree and gradients; optax's `adamw` and `contrib.muon` are measured in
the same rounds as the baselines. Steps run as the workloads' do (`benchmarks._timing`: compiled once,
donated, interleaved rounds); the ratio is each step's median over optax AdamW's, paired by round. State
bytes are the bytes of the state `init` returns (all on one device), over optax AdamW's.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable

import jax
import optax

import gradtx
import gradtx.optax_compat
from benchmarks import _timing
from benchmarks.contenders import gradtx_contender, optax_contender
from benchmarks.trees import random_like, transformer_tree

LR = 1e-3
TREE = (256, 4, 1024)
"""The transformer-like tree's width, layers and vocabulary (`make bench`): smaller than the catalogue's:
SOAP and PSGD Kron keep a factor per dimension up to 10,000 and 8,192 wide (the embedding's vocabulary
included) and decompose them on the CPU."""

BASELINE = "adamw (optax)"

CONTENDERS: dict[str, tuple[str, Callable[[], Any]]] = {
    BASELINE: ("optax", lambda: optax.adamw(LR, weight_decay=1e-4)),
    "muon (optax.contrib)": ("optax", lambda: optax.contrib.muon(LR)),
    "muon": ("gradtx", lambda: gradtx.muon(LR)),
    "muon, PolarExpress": ("gradtx", lambda: gradtx.muon(LR, ns_coeffs="polar_express")),
    "normuon": ("gradtx", lambda: gradtx.get("NorMuon", lr=LR)),
    "adamuon": ("gradtx", lambda: gradtx.get("AdaMuon", lr=LR)),
    "muon_clip (no clip given)": ("gradtx", lambda: gradtx.get("MuonClip", lr=LR)),
    "scion": ("gradtx", lambda: gradtx.get("SCION", lr=LR)),
    "scion_light": ("gradtx", lambda: gradtx.get("SCIONLight", lr=LR)),
    "soap": ("gradtx", lambda: gradtx.get("SOAP", lr=LR)),
    "psgd_kron": ("gradtx", lambda: gradtx.get("Kron", lr=LR)),
    "adahessian (estimate given)": ("gradtx", lambda: gradtx.get("AdaHessian", lr=LR)),
    "sophia_h (estimate given)": ("gradtx", lambda: gradtx.get("SophiaH", lr=LR)),
    "mars": ("gradtx", lambda: gradtx.get("MARS", lr=LR)),
    "adam_mini": ("gradtx", lambda: gradtx.get("AdamMini", lr=LR)),
    "came": ("gradtx", lambda: gradtx.get("CAME", lr=LR)),
    "apollo": ("gradtx", lambda: gradtx.get("APOLLO", lr=LR)),
    "stable_adamw": ("gradtx", lambda: gradtx.get("StableAdamW", lr=LR)),
    "laprop": ("gradtx", lambda: gradtx.get("LaProp", lr=LR)),
    "grams": ("gradtx", lambda: gradtx.get("Grams", lr=LR)),
    "fadam": ("gradtx", lambda: gradtx.get("FAdam", lr=LR)),
    "tiger": ("gradtx", lambda: gradtx.get("Tiger", lr=LR)),
    "cautious adamw": (
        "gradtx",
        lambda: gradtx.cautious(gradtx.optax_compat.adamw(LR, weight_decay=1e-4), negated=True),
    ),
    "spam": ("gradtx", lambda: gradtx.get("SPAM", lr=LR)),
    "stable_spam": ("gradtx", lambda: gradtx.get("StableSPAM", lr=LR)),
    "schedule_free_radam": ("gradtx", lambda: gradtx.get("ScheduleFreeRAdam", lr=LR)),
}
"""Label -> (library, factory of the transform)."""

GIVEN_HESSIAN = ("adahessian (estimate given)", "sophia_h (estimate given)")
"""Rows whose step is given the Hessian-diagonal estimate (`hessian=`, the squared gradients here): the
optimizer's own work, without the model's Hessian-vector products (which cost about a backward pass)."""


def _contender(name: str, library: str, tx: Any) -> _timing.Contender:
    if library == "optax":
        return optax_contender(name, tx)
    if name not in GIVEN_HESSIAN:
        return gradtx_contender(name, tx)

    def step(params, state, grads):
        hessian = jax.tree.map(lambda g: g * g, grads)
        updates, state = tx.update(grads, state, params, hessian=hessian)
        return gradtx.apply_updates(params, updates), state

    return _timing.Contender(name, tx.init, step)


def _compile_seconds(contender: _timing.Contender, params: Any, grads: Any) -> float:
    state = jax.eval_shape(contender.init, params)

    def step(p, s, g):
        return contender.step(p, s, g)

    gc.collect()
    start = time.perf_counter()
    jax.jit(step, donate_argnums=(0, 1)).lower(params, state, grads).compile()
    return time.perf_counter() - start


def measure(
    d_model: int, layers: int, vocab: int, rounds: int, min_round_s: float, only: list[str] | None = None
):
    """Rows per contender: step min and median (ms), compile (s), state bytes, the ratios to optax AdamW."""
    params = transformer_tree(d_model, layers, vocab)
    grads = random_like(params, 7, 1e-3)
    names = [n for n in CONTENDERS if only is None or n in only or n == BASELINE]
    rows = {}
    base = None
    for name in names:
        library, make = CONTENDERS[name]
        contender = _contender(name, library, make())
        pair = [contender] if base is None else [base[0], contender]
        runners = [_timing.Runner(c, params, grads) for c in pair]
        samples = _timing.interleaved(runners, rounds, min_round_s)
        if base is None:
            base = (contender, samples[name])
        state = jax.eval_shape(contender.init, params)
        rows[name] = {
            "library": library,
            "min_ms": min(samples[name]) * 1e3,
            "median_ms": sorted(samples[name])[len(samples[name]) // 2] * 1e3,
            "step_ratio": _timing.median_ratio(samples[name], samples[BASELINE]) if name != BASELINE else 1.0,
            "compile_s": _compile_seconds(contender, params, grads),
            "state_bytes": sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state)),
            "kernels": runners[-1].kernels,
        }
        print(f"  frontier {name:28s} step {rows[name]['step_ratio']:.2f}x adamw", flush=True)
        del runners
        gc.collect()
    base_bytes = rows[BASELINE]["state_bytes"]
    for r in rows.values():
        r["state_ratio"] = r["state_bytes"] / base_bytes
    leaves = len(jax.tree.leaves(params))
    size = sum(x.size for x in jax.tree.leaves(params))
    return {"tree": f"a transformer-like tree ({leaves} leaves, {size / 1e6:.1f}M parameters)", "rows": rows}


def table(result: dict) -> list[str]:
    lines = [
        f"The optimizers optax does not have, beside optax's AdamW and Muon, on {result['tree']} "
        "(`benchmarks/frontier.py`): each at its reference's defaults. Step: the fastest step and the median "
        "over rounds of the ratio to AdamW's, paired by round; compile: one fresh compile; state: the bytes "
        "`init` returns.",
        "",
        "| optimizer | step (ms) | step / AdamW | compile (s) | state (MiB) | state / AdamW | kernels |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in result["rows"].items():
        lines.append(
            f"| {name} | {r['min_ms']:.2f} | {r['step_ratio']:.2f}x | {r['compile_s']:.2f} "
            f"| {r['state_bytes'] / 2**20:,.2f} | {r['state_ratio']:.2f}x | {r['kernels']:,} |"
        )
    lines += [
        "",
        "AdaHessian and Sophia-H are given their Hessian-diagonal estimate (`hessian=`): their own step, "
        "without the Hessian-vector products of the model (about one more backward pass on the steps "
        "that refresh it).",
    ]
    return lines
