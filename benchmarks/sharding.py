"""Collectives per step under `jax.jit` with `NamedSharding` on a 2-D mesh: gradtx (per leaf and packed) vs
optax.

    python -m benchmarks.sharding --json /tmp/sharding.json   # benchmarks.run runs it in its own process

It needs 8 devices (8 simulated CPU devices, set before JAX starts), so `benchmarks.run`
starts it as a separate process. The tree is the one a pod shards: 6 layers of a kernel
`w` sharded `P("data", "model")`, a bias `b` sharded `P("model")` and a norm scale `ln`
replicated, on a 4 x 2 mesh `("data", "model")`. Each step is compiled with params and
state donated, and the collective instructions of the compiled HLO are counted.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
from typing import Any

KINDS = ("all-gather", "all-reduce", "reduce-scatter", "collective-permute", "all-to-all")


def count(hlo: str) -> dict[str, int]:
    """Collective instructions of a compiled HLO module, by kind (an asynchronous start/done pair counts
    once)."""
    return {k: len(re.findall(rf"\b{k}(?:-start)?\(", hlo)) for k in KINDS}


def _measure(layers: int, rows: int, cols: int) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import gradtx

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))
    rng = np.random.default_rng(0)
    shapes = {"w": ((rows, cols), P("data", "model")), "b": ((cols,), P("model")), "ln": ((rows,), P())}
    params = {
        f"layer{i}": {
            k: jax.device_put(
                jnp.asarray(rng.standard_normal(s) * 0.1, jnp.float32), NamedSharding(mesh, spec)
            )
            for k, (s, spec) in shapes.items()
        }
        for i in range(layers)
    }
    grads = jax.tree.map(lambda p: p * 0.01, params)

    def collectives(tx, params, grads, apply):
        def step(p, s, g):
            updates, s = tx.update(g, s, p)
            return apply(p, updates), s

        compiled = jax.jit(step, donate_argnums=(0, 1)).lower(params, tx.init(params), grads).compile()
        return count(compiled.as_text())

    transforms = {
        "adam": (gradtx.adam(1e-3), optax.adam(1e-3)),
        "clip_by_global_norm + adamw": (
            gradtx.chain(
                gradtx.clip_by_global_norm(1.0),
                gradtx.adamw(1e-3, weight_decay=1e-4, scale_decay_by_learning_rate=True),
            ),
            optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3, weight_decay=1e-4)),
        ),
        "rmsprop": (
            gradtx.rmsprop(1e-3, decay=0.9, momentum=0.5),
            optax.rmsprop(1e-3, decay=0.9, momentum=0.5),
        ),
        "lars": (
            gradtx.lars(0.1, momentum=0.9, weight_decay=1e-4),
            optax.lars(0.1, weight_decay=1e-4, trust_coefficient=0.001, momentum=0.9),
        ),
        "shampoo": (gradtx.shampoo(0.1), None),
    }
    packed, packed_grads = gradtx.packing.pack(params), gradtx.packing.pack(grads)
    out = {}
    for name, (ours, theirs) in transforms.items():
        out[name] = {
            "gradtx": collectives(ours, params, grads, gradtx.apply_updates),
            "gradtx packed": collectives(ours, packed, packed_grads, gradtx.apply_updates),
            "optax": None if theirs is None else collectives(theirs, params, grads, optax.apply_updates),
        }
    tree = f"{layers} layers of w {rows}x{cols} P('data', 'model'), b {cols} P('model'), ln {rows} replicated"
    return {"mesh": "4 x 2 mesh ('data', 'model') of 8 CPU devices", "tree": tree, "transforms": out}


SIZES = {"full": (6, 256, 512), "smoke": (2, 8, 16)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sharding", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", choices=sorted(SIZES), default="full")
    parser.add_argument("--json", type=pathlib.Path, required=True, help="where to write the counts")
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_num_cpu_devices", 8)  # before the first JAX operation of this process
    result = _measure(*SIZES[args.sizes])
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
