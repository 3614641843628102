"""The benchmark workloads: trees, gradients, the contenders on them (`benchmarks.contenders`) and targets."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import gradtx
from benchmarks._timing import Contender
from benchmarks.contenders import (
    CLIP,
    EPS,
    LR,
    WD,
    bandwidth_probe,
    gradtx_contender,
    jnp_adam,
    jnp_lazy_adam,
    jnp_sgd,
    optax_contender,
)
from benchmarks.trees import mlp_loss, random_like, residual_mlp, transformer_tree
from gradtx import packing
from gradtx.sparse import RowSparse


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
    optimizer's arrays, so the memory target does not apply). `after` lists pairs of
    contenders `(a, b)`: `b`'s step is also timed right after one step of `a` each time
    (caches as a training loop leaves them: a dense step passes over whole tables), as the
    row "`b`, right after `a`".
    """

    name: str
    title: str
    params: Any
    grads: Any
    contenders: list[Contender]
    bytes: int
    targets: list[dict] = dataclasses.field(default_factory=list)
    optimizer_only: bool = True
    after: tuple[tuple[str, str], ...] = ()


# --------------------------------------------------------------------------- trees


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
        random_like(params, 0, 1e-3),
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
        random_like(params, 1, 1e-3),
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
        random_like(params, 2, 1e-3),
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
    grads = random_like(params, 3, 1e-3)
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
            gradtx_contender(
                "gradtx packed(tx)",
                packing.packed(gradtx.adam(LR, eps=EPS)),
                note="params and gradients leaf by leaf, Adam's state packed (packing.packed: nnx.Optimizer)",
                own_memory=True,  # the gradients packed into one buffer: a copy of them
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
                f"{count}, adam with packed state (packing.packed), params leaf by leaf: step, "
                "gradtx / optax",
                "step_ratio",
                0.5,
                a="gradtx packed(tx)",
            ),
            _ratio_target(
                f"{count}, adam on packed parameters: compile, gradtx / optax",
                "compile_ratio",
                0.2,
                a="gradtx packed",
            ),
            {
                "label": f"{count}, adam with packed state: peak memory / (params + grads + state), one "
                "packed copy of the gradients",
                "metric": "peak_ratio",
                "a": "gradtx packed(tx)",
                "op": "<=",
                "goal": 1.3,
            },
            {
                "label": f"{count}, adam on packed parameters: peak memory / (params + grads + state)",
                "metric": "peak_ratio",
                "a": "gradtx packed",
                "op": "<=",
                "goal": 1.05,
            },
        ],
    )


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


DENSE = "gradtx adam (dense)"
"""The sparse workload's dense step, after which its lazy steps are also timed (cold caches)."""


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
            {
                "label": (
                    f"sparse lazy_adam ({s.touched_rows:,} of {s.table_rows:,} rows) right after a dense "
                    "step: speedup over dense adam"
                ),
                "metric": "speedup_median",
                "a": "gradtx adam (dense)",
                "b": f"gradtx lazy_adam, right after {DENSE}",
                "op": ">=",
                "goal": 50.0,
            },
        ],
        after=((DENSE, "gradtx lazy_adam"), (DENSE, "jnp lazy_adam")),
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
