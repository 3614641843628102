"""The benchmark contenders: gradtx's and optax's steps, and hand-fused jnp steps as the bound.

Each is a `benchmarks._timing.Contender` (init, a donated step, a label) that
`benchmarks.workloads` puts on its trees.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

import gradtx
from benchmarks._timing import Contender

LR, B1, B2, EPS, WD, CLIP = 1e-3, 0.9, 0.999, 1e-8, 1e-4, 1.0


def gradtx_contender(name: str, tx: Any, note: str = "", **kw: Any) -> Contender:
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    return Contender(name, tx.init, step, note=note, **kw)


def optax_contender(name: str, tx: Any, note: str = "", **kw: Any) -> Contender:
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    return Contender(name, tx.init, step, note=note, **kw)


def jnp_adam(name: str, *, clip: float | None = None, weight_decay: float = 0.0) -> Contender:
    """Adam written by hand in jnp, one expression per leaf (the floor): optionally a global-norm clip and
    decay."""

    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return jnp.zeros((), jnp.int32), zeros, jax.tree.map(jnp.zeros_like, params)

    def step(params, state, grads):
        t, m, v = state
        t = t + 1
        tf = t.astype(jnp.float32)
        c = LR * jnp.sqrt(1 - B2**tf) / (1 - B1**tf)
        scale = 1.0
        if clip is not None:
            norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
            scale = clip / jnp.maximum(norm, clip)

        def leaf(p, g, m, v):
            g = g * scale
            m = m + (g - m) * (1 - B1)
            v = v + (g * g - v) * (1 - B2)
            return p - c * m / (jnp.sqrt(v) + EPS) - (LR * weight_decay) * p, m, v

        out = jax.tree.map(leaf, params, grads, m, v)

        def pick(i):
            return jax.tree.map(lambda _, o: o[i], params, out)

        return pick(0), (t, pick(1), pick(2))

    note = "hand-written jnp, one fused expression per leaf"
    return Contender(name, init, step, note=note + (" + global-norm clip" if clip else ""))


def jnp_sgd(name: str) -> Contender:
    """`p - lr * g` per leaf: no state, the least any update of these leaves can cost."""
    return Contender(
        name,
        lambda params: (),
        lambda p, s, g: (jax.tree.map(lambda p, g: p - LR * g, p, g), s),
        note="bare `p - lr*g` per leaf: the least any update of these leaves costs",
        same_math=False,
    )


def bandwidth_probe(n: int) -> Contender:
    """`p, m, v += g`: Adam's memory traffic (4 reads, 3 writes of `n` floats) with no real math.

    Run in the same rounds as the optimizers, its GB/s is the bandwidth this device gives
    to exactly that access pattern: the bound an Adam step is measured against.
    """

    def step(p, s, g):
        m, v = s

        def add(a, b):
            return a + b

        return jax.tree.map(add, p, g), (jax.tree.map(add, m, g), jax.tree.map(add, v, g))

    def init(p):
        return (jax.tree.map(jnp.zeros_like, p), jax.tree.map(jnp.zeros_like, p))

    return Contender(
        "bw adam-shaped",
        init,
        step,
        bytes=28 * n,
        same_math=False,
        note="bandwidth probe: `p, m, v += g`, Adam's 4 reads + 3 writes, no real math",
    )


def jnp_lazy_adam(name: str, grads: tuple) -> Contender:
    """LazyAdam by hand on `{"table": ...}` with `grads = (unique rows, values)`: gather, update, scatter
    (the O(k) floor)."""

    def init(params):
        return jnp.zeros((), jnp.int32), jnp.zeros_like(params["table"]), jnp.zeros_like(params["table"])

    def step(params, state, grads):
        t, m, v = state
        t = t + 1
        tf = t.astype(jnp.float32)
        c = LR * jnp.sqrt(1 - B2**tf) / (1 - B1**tf)
        idx, g = grads
        mr = m[idx] + (g - m[idx]) * (1 - B1)
        vr = v[idx] + (g * g - v[idx]) * (1 - B2)
        table = params["table"].at[idx].add(-c * mr / (jnp.sqrt(vr) + EPS), unique_indices=True)
        return {"table": table}, (
            t,
            m.at[idx].set(mr, unique_indices=True),
            v.at[idx].set(vr, unique_indices=True),
        )

    return Contender(name, init, step, grads=grads, note="hand-written gather/update/scatter on unique rows")
