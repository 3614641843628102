"""The benchmark workloads: trees, gradients, contenders (gradtx, optax, hand-fused jnp) and targets."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import gradtx
from benchmarks._timing import Contender
from gradtx import packing
from gradtx.sparse import RowSparse

LR, B1, B2, EPS, WD, CLIP = 1e-3, 0.9, 0.999, 1e-8, 1e-4, 1.0


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The sizes of every workload (`FULL` for the results, `SMOKE` for the test of this package)."""

    big: int = 16 * 2**20  # elements of the one big leaf
    d_model: int = 384  # the transformer-like tree: width, layers, vocabulary
    layers: int = 12
    vocab: int = 8192
    small_leaves: int = 2000  # the many-small-leaves tree
    small_size: int = 1000
    table_rows: int = 262_144  # the embedding table of the sparse workload
    table_dim: int = 64
    touched_rows: int = 1024
    mlp_layers: int = 250  # the train-step workload: a residual MLP of this many layers ...
    mlp_width: int = 16  # ... of this width (w: width x width, b: width per layer) ...
    mlp_batch: int = 64  # ... on a batch of this many rows
    bandwidth_elems: int = 2**26  # per array of the bandwidth probe


FULL = Sizes()
SMOKE = Sizes(
    big=4096,
    d_model=16,
    layers=2,
    vocab=64,
    small_leaves=20,
    small_size=10,
    table_rows=512,
    table_dim=4,
    touched_rows=8,
    mlp_layers=4,
    mlp_width=4,
    mlp_batch=4,
    bandwidth_elems=2**12,
)


@dataclasses.dataclass
class Workload:
    """A tree, its gradients, the contenders run on it and the targets it is judged by.

    `bytes` is what one step's math must touch (read and write), for GB/s; `targets` are
    dicts `{label, metric, a, b, op, goal}` evaluated by `benchmarks.run` (a miss is
    explained by `benchmarks.reasons` from the measurements). `optimizer_only` is False for
    a step that also runs a model (its peak memory holds activations, not only the
    optimizer's arrays, so the memory target does not apply).
    """

    name: str
    title: str
    params: Any
    grads: Any
    contenders: list[Contender]
    bytes: int
    targets: list[dict] = dataclasses.field(default_factory=list)
    optimizer_only: bool = True


# --------------------------------------------------------------------------- contenders


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


# --------------------------------------------------------------------------- trees


def _random_like(tree: Any, seed: int, scale: float) -> Any:
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: jnp.asarray(rng.standard_normal(x.shape, np.float32) * scale), tree)


def transformer_tree(d: int, layers: int, vocab: int) -> dict:
    """The parameter shapes of a pre-LN transformer: embedding, per layer attention and MLP, final norm."""

    def zeros(*shape):
        return jnp.zeros(shape, jnp.float32)

    tree = {"embed": zeros(vocab, d), "final_norm": {"scale": zeros(d), "bias": zeros(d)}}
    for i in range(layers):
        tree[f"layer{i:02d}"] = {
            "norm1": {"scale": zeros(d), "bias": zeros(d)},
            "attn": {
                "qkv": zeros(d, 3 * d),
                "qkv_bias": zeros(3 * d),
                "out": zeros(d, d),
                "out_bias": zeros(d),
            },
            "norm2": {"scale": zeros(d), "bias": zeros(d)},
            "mlp": {
                "up": zeros(d, 4 * d),
                "up_bias": zeros(4 * d),
                "down": zeros(4 * d, d),
                "down_bias": zeros(d),
            },
        }
    return tree


def _size(tree: Any) -> int:
    return sum(x.size for x in jax.tree.leaves(tree))


def adam_bytes(n: int, *, extra_grad_reads: int = 0) -> int:
    """Adam touches 7 float32 words per parameter: reads p, g, m, v and writes p, m, v."""
    return (7 + extra_grad_reads) * 4 * n


def clip_adamw(gradtx_or_optax: Any) -> Any:
    return gradtx_or_optax.chain(gradtx_or_optax.clip_by_global_norm(CLIP), _adamw(gradtx_or_optax))


def _adamw(lib: Any) -> Any:
    if lib is gradtx:  # optax's convention (decay scaled by the rate), so both do the same math
        return gradtx.adamw(LR, weight_decay=WD, eps=EPS, scale_decay_by_learning_rate=True)
    return optax.adamw(LR, eps=EPS, weight_decay=WD)


def _ratio_target(label: str, metric: str, goal: float, a: str = "gradtx") -> dict:
    return {"label": label, "metric": metric, "a": a, "b": "optax", "op": "<=", "goal": goal}


PER_LEAF_GOAL = 1.05
"""The default (per-leaf) aliases against optax, on every workload where the big-leaf targets do not say
less."""


def _per_leaf_target(what: str) -> dict:
    return _ratio_target(f"{what}: step, gradtx (per leaf) / optax", "step_ratio", PER_LEAF_GOAL)


# --------------------------------------------------------------------------- workloads


def big_adam(s: Sizes) -> Workload:
    params = {"w": jnp.full((s.big,), 0.01, jnp.float32)}
    n = s.big
    return Workload(
        "big_adam",
        f"adam, one leaf of {n:,} float32",
        params,
        _random_like(params, 0, 1e-3),
        [
            gradtx_contender("gradtx", gradtx.adam(LR, eps=EPS)),
            optax_contender("optax", optax.adam(LR, eps=EPS)),
            jnp_adam("jnp"),
            gradtx_contender(
                "gradtx mu_dtype=bf16",
                gradtx.adam(LR, eps=EPS, mu_dtype=jnp.bfloat16),
                bytes=24 * n,
                note="`m` stored in bfloat16 (24 bytes per parameter)",
                same_math=False,
            ),
            bandwidth_probe(n),
        ],
        adam_bytes(n),
        [
            _ratio_target("big-leaf adam: step, gradtx / optax", "step_ratio", 1.0),
            {
                "label": "big-leaf adam: gradtx GB/s / measured bandwidth",
                "metric": "bandwidth_fraction",
                "a": "gradtx",
                "op": ">=",
                "goal": 0.8,
            },
        ],
    )


def big_clip_adamw(s: Sizes) -> Workload:
    params = {"w": jnp.full((s.big,), 0.01, jnp.float32)}
    return Workload(
        "big_clip_adamw",
        f"clip_by_global_norm + adamw, one leaf of {s.big:,}",
        params,
        _random_like(params, 1, 1e-3),
        [
            gradtx_contender("gradtx", clip_adamw(gradtx)),
            optax_contender("optax", clip_adamw(optax)),
            jnp_adam("jnp", clip=CLIP, weight_decay=WD),
        ],
        adam_bytes(s.big, extra_grad_reads=1),
        [_ratio_target("clip_by_global_norm + adamw: step, gradtx / optax", "step_ratio", 0.6)],
    )


def transformer_clip_adamw(s: Sizes) -> Workload:
    params = transformer_tree(s.d_model, s.layers, s.vocab)
    leaves, n = len(jax.tree.leaves(params)), _size(params)
    return Workload(
        "transformer",
        f"clip_by_global_norm + adamw, transformer-like tree ({leaves} leaves, {n / 1e6:.1f}M)",
        params,
        _random_like(params, 2, 1e-3),
        [
            gradtx_contender("gradtx", clip_adamw(gradtx)),
            optax_contender("optax", clip_adamw(optax)),
            jnp_adam("jnp", clip=CLIP, weight_decay=WD),
        ],
        adam_bytes(n, extra_grad_reads=1),
        [_per_leaf_target("transformer-like tree, clip + adamw")],
    )


def many_small_adam(s: Sizes) -> Workload:
    params = {f"p{i:04d}": jnp.full((s.small_size,), 0.01, jnp.float32) for i in range(s.small_leaves)}
    grads = _random_like(params, 3, 1e-3)
    count = f"{s.small_leaves:,} leaves of {s.small_size:,}"
    packed = packing.pack(params)

    return Workload(
        "many_small",
        f"adam, {count} float32",
        params,
        grads,
        [
            gradtx_contender("gradtx", gradtx.adam(LR, eps=EPS), note="the alias, leaf by leaf"),
            optax_contender("optax", optax.adam(LR, eps=EPS)),
            gradtx_contender(
                "gradtx packed",
                gradtx.adam(LR, eps=EPS),
                params=packed,
                grads=packing.pack(grads, layout=packed.layout),
                note="the same alias on packed parameters and gradients (gradtx.packing)",
            ),
            jnp_adam("jnp"),
            jnp_sgd("jnp sgd"),
        ],
        adam_bytes(s.small_leaves * s.small_size),
        [
            _per_leaf_target(f"{count}, adam"),
            _ratio_target(
                f"{count}, adam on packed parameters: step, gradtx / optax",
                "step_ratio",
                0.15,
                a="gradtx packed",
            ),
            _ratio_target(
                f"{count}, adam on packed parameters: compile, gradtx / optax",
                "compile_ratio",
                0.2,
                a="gradtx packed",
            ),
            {
                "label": f"{count}, adam on packed parameters: peak memory / (params + grads + state)",
                "metric": "peak_ratio",
                "a": "gradtx packed",
                "op": "<=",
                "goal": 1.05,
            },
        ],
    )


def residual_mlp(s: Sizes) -> dict:
    """The parameters of a residual MLP: per layer a `width x width` kernel and a bias (small leaves)."""
    rng = np.random.default_rng(5)
    w = s.mlp_width
    return {
        f"layer{i:03d}": {
            "w": jnp.asarray(rng.standard_normal((w, w)) / (4 * np.sqrt(w)), jnp.float32),
            "b": jnp.zeros((w,), jnp.float32),
        }
        for i in range(s.mlp_layers)
    }


def mlp_loss(params: Any, x: jax.Array) -> jax.Array:
    """`mean(h ** 2)` after the layers `h <- h + tanh(h @ w + b)`, unrolled (no scan: a leaf per layer)."""
    h = x
    for name in sorted(params):
        h = h + jnp.tanh(h @ params[name]["w"] + params[name]["b"])
    return jnp.mean(h * h)


def train_contender(
    name: str, tx: Any, apply: Callable, *, packed: Any = None, note: str = "", **kw: Any
) -> Contender:
    """A whole train step `(params, state, x)`: forward, backward and the update; through views when
    `packed`."""

    def step(params, state, x):
        grads = jax.grad(lambda p: mlp_loss(packing.unpack(p), x))(params)
        updates, state = tx.update(grads, state, params)
        return apply(params, updates), state

    return Contender(name, tx.init, step, params=packed, note=note, **kw)


def train_step(s: Sizes) -> Workload:
    params = residual_mlp(s)
    x = jnp.asarray(np.random.default_rng(6).standard_normal((s.mlp_batch, s.mlp_width)), jnp.float32)
    packed = packing.pack(params)
    what = f"{2 * s.mlp_layers} leaves"
    return Workload(
        "train_step",
        f"a whole train step (forward, backward, adam) of a residual MLP: {s.mlp_layers} layers of "
        f"width {s.mlp_width}, batch {s.mlp_batch}",
        params,
        x,
        [
            train_contender(
                "gradtx", gradtx.adam(LR, eps=EPS), gradtx.apply_updates, note="the alias, leaf by leaf"
            ),
            train_contender("optax", optax.adam(LR, eps=EPS), optax.apply_updates),
            train_contender(
                "gradtx packed",
                gradtx.adam(LR, eps=EPS),
                gradtx.apply_updates,
                packed=packed,
                note="packed parameters: the model reads views, gradients arrive packed",
            ),
            train_contender(
                "gradtx packed sgd",
                gradtx.sgd(LR),
                gradtx.apply_updates,
                packed=packed,
                same_math=False,
                note="the model's own work: forward, backward and a bare SGD step on the packed buffer",
            ),
        ],
        adam_bytes(_size(params)),
        [
            _per_leaf_target(f"train step, {what}"),
            _ratio_target(
                f"train step, {what}, packed: step, gradtx / optax", "step_ratio", 0.6, a="gradtx packed"
            ),
            _ratio_target(
                f"train step, {what}, packed: compile, gradtx / optax",
                "compile_ratio",
                1.0,
                a="gradtx packed",
            ),
        ],
        optimizer_only=False,
    )


def sparse_lazy_adam(s: Sizes) -> Workload:
    shape = (s.table_rows, s.table_dim)
    params = {"table": jnp.full(shape, 0.01, jnp.float32)}
    rng = np.random.default_rng(4)
    idx = jnp.asarray(rng.choice(s.table_rows, s.touched_rows, replace=False).astype(np.int32))
    vals = jnp.asarray(rng.standard_normal((s.touched_rows, s.table_dim), np.float32) * 1e-3)
    sparse = {"table": RowSparse(idx, vals, shape)}
    dense = {"table": sparse["table"].todense()}
    row_bytes = adam_bytes(s.touched_rows * s.table_dim) + 4 * s.touched_rows

    return Workload(
        "sparse",
        f"lazy_adam, {s.touched_rows:,} of {s.table_rows:,} rows x {s.table_dim} (RowSparse)",
        params,
        sparse,
        [
            gradtx_contender(
                "gradtx lazy_adam", gradtx.lazy_adam(LR, eps=EPS), note="RowSparse gradient, O(touched rows)"
            ),
            jnp_lazy_adam("jnp lazy_adam", (idx, vals)),
            gradtx_contender(
                "gradtx adam (dense)",
                gradtx.adam(LR, eps=EPS),
                grads=dense,
                bytes=adam_bytes(_size(params)),
                note="the same gradient, dense",
            ),
            optax_contender(
                "optax adam (dense)", optax.adam(LR, eps=EPS), grads=dense, bytes=adam_bytes(_size(params))
            ),
        ],
        row_bytes,
        [
            {
                "label": "sparse workload, dense adam: step, gradtx (per leaf) / optax",
                "metric": "step_ratio",
                "a": "gradtx adam (dense)",
                "b": "optax adam (dense)",
                "op": "<=",
                "goal": PER_LEAF_GOAL,
            },
            {
                "label": (
                    f"sparse lazy_adam ({s.touched_rows:,} of {s.table_rows:,} rows): speedup over dense adam"
                ),
                "metric": "speedup",
                "a": "gradtx adam (dense)",
                "b": "gradtx lazy_adam",
                "op": ">=",
                "goal": 50.0,
            },
        ],
    )


ALL: dict[str, Callable[[Sizes], Workload]] = {
    "big_adam": big_adam,
    "big_clip_adamw": big_clip_adamw,
    "transformer": transformer_clip_adamw,
    "many_small": many_small_adam,
    "train_step": train_step,
    "sparse": sparse_lazy_adam,
}


__all__ = ["ALL", "FULL", "PER_LEAF_GOAL", "SMOKE", "Sizes", "Workload"]
