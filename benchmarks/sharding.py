"""Collectives per step under `jax.jit` with `NamedSharding` on a 2-D mesh: gradtx (per leaf and packed) vs
optax, and the optimizer state's bytes per device.

    python -m benchmarks.sharding --json /tmp/sharding.json   # benchmarks.run runs it in its own process

It needs 8 devices (8 simulated CPU devices, set before JAX starts), so `benchmarks.run`
starts it as a separate process. The tree is the one a pod shards: 6 layers of a kernel
`w` sharded `P("data", "model")`, a bias `b` sharded `P("model")` and a norm scale `ln`
replicated, on a 4 x 2 mesh `("data", "model")`. Each step is compiled with params and
state donated, and the collective instructions of the compiled HLO are counted: on a mesh
of auto axes (`Mesh`), and under `jax.set_mesh` on one of explicit axes
(`jax.make_mesh(..., axis_types=(AxisType.Explicit,) * 2)`). The state's bytes on each
device (`addressable_shards`; every device holds the same) are those of the state a jitted
step returns: from replicated parameters, from the sharded ones (the state sharded like
them), and with ZeRO (`gradtx.parallel.sharded_state(tx, "data", mesh=mesh)` under jit); and inside
`shard_map` over the 8 devices, ZeRO's state per device and its step's collectives.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
from typing import Any

from benchmarks.collectives import KINDS, count, whole_bytes  # noqa: F401 -- the tests take them from here too


def per_device(tree: Any) -> int:
    """Bytes of `tree`'s arrays held by each device (asserted the same on every one)."""
    import jax

    held: collections.Counter = collections.Counter()
    for x in jax.tree.leaves(tree):
        for shard in x.addressable_shards:
            held[shard.device] += shard.data.nbytes
    assert len(held) == 8 and len(set(held.values())) == 1, f"devices hold different bytes: {held}"
    return next(iter(held.values()))


def _measure(layers: int, rows: int, cols: int, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    import jax
    import numpy as np
    import optax
    import optax.contrib
    from jax.sharding import AxisType, Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import gradtx

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))
    explicit = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    rng = np.random.default_rng(0)
    shapes = {"w": ((rows, cols), P("data", "model")), "b": ((cols,), P("model")), "ln": ((rows,), P())}
    host = [
        {k: rng.standard_normal(s).astype(np.float32) * 0.1 for k, (s, _) in shapes.items()}
        for _ in range(layers)
    ]

    def place(mesh, *, replicated=False):  # the tree on `mesh`, sharded as `shapes` says (or replicated)
        def put(x, spec):
            return jax.device_put(x, NamedSharding(mesh, P() if replicated else spec))

        return {f"layer{i}": {k: put(x, shapes[k][1]) for k, x in h.items()} for i, h in enumerate(host)}

    def step_fn(tx, apply):
        def step(p, s, g):
            updates, s = tx.update(g, s, p)
            return apply(p, updates), s

        return step

    def collectives(tx, params, apply):
        grads = jax.tree.map(lambda p: p * 0.01, params)
        step = jax.jit(step_fn(tx, apply), donate_argnums=(0, 1))
        return count(step.lower(params, tx.init(params), grads).compile().as_text())

    def or_failure(tx, params, apply):  # optax's muon under Explicit axes raises a ShardingTypeError
        try:
            return collectives(tx, params, apply)
        except Exception as e:  # the class is not public
            return type(e).__name__

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
        "muon": (gradtx.muon(0.02), optax.contrib.muon(0.02)),
        "shampoo": (gradtx.shampoo(0.1), None),
    }
    params = place(mesh)
    packed = gradtx.packing.pack(params)
    out = {}
    for name, (ours, theirs) in transforms.items():
        if only is not None and name not in only:
            continue
        row = out[name] = {
            "gradtx": collectives(ours, params, gradtx.apply_updates),
            "gradtx packed": collectives(ours, packed, gradtx.apply_updates),
            "optax": None if theirs is None else collectives(theirs, params, optax.apply_updates),
        }
        with jax.set_mesh(explicit):  # the same step on a mesh of explicit axes
            on_explicit = place(explicit)
            row["gradtx explicit"] = collectives(ours, on_explicit, gradtx.apply_updates)
            row["optax explicit"] = (
                None if theirs is None else or_failure(theirs, on_explicit, optax.apply_updates)
            )

    def state_bytes(tx, params):  # per device, of the state a jitted step returns
        grads = jax.tree.map(lambda p: p * 0.01, params)
        return per_device(jax.jit(step_fn(tx, optax.apply_updates))(params, tx.init(params), grads)[1])

    states = {}
    for name in ("adam", "clip_by_global_norm + adamw"):
        ours, theirs = transforms[name]
        zero = gradtx.parallel.sharded_state(ours, "data", mesh=mesh)
        states[name] = {
            "replicated": state_bytes(ours, place(mesh, replicated=True)),
            "gradtx": state_bytes(ours, params),
            "optax": state_bytes(theirs, params),
            "zero": state_bytes(zero, params),
            "zero, params replicated": state_bytes(zero, place(mesh, replicated=True)),
        }
    tree = f"{layers} layers of w {rows}x{cols} P('data', 'model'), b {cols} P('model'), ln {rows} replicated"
    return {
        "mesh": "4 x 2 mesh ('data', 'model') of 8 CPU devices",
        "tree": tree,
        "transforms": out,
        "state_bytes": states,
    }


def _zero_in_shard_map(
    layers: int, rows: int, cols: int, only: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """ZeRO-1 inside `shard_map` over 8 devices from replicated params (plain data parallelism): each
    optimizer's state bytes on one device unsharded and per device under `sharded_state` (read from the
    state `init` makes, `P("data")`: N rows), and the compiled step's collectives and the bytes of the
    whole arrays they combine (`whole_bytes`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType
    from jax.sharding import PartitionSpec as P

    import gradtx

    mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
    rng = np.random.default_rng(0)
    shapes = {"w": (rows, cols), "b": (cols,), "ln": (rows,)}
    params = {
        f"layer{i}": {k: jnp.asarray(rng.standard_normal(s), jnp.float32) * 0.1 for k, s in shapes.items()}
        for i in range(layers)
    }
    grads = jax.tree.map(lambda p: jnp.broadcast_to(p * 0.01, (8, *p.shape)), params)  # one per replica
    transforms = {  # name: (transform, whether its state is gathered for the step)
        "adam": (gradtx.adam(1e-3), False),
        "lamb": (gradtx.lamb(1e-3, weight_decay=1e-4), False),
        "adafactor": (gradtx.adafactor(1e-3), False),
        "came": (gradtx.came(1e-3), False),
        "sm3": (gradtx.sm3(1e-3), False),
        "muon": (gradtx.muon(0.02), True),
        "shampoo": (gradtx.shampoo(0.1), True),
    }

    def nbytes(tree):
        return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree.leaves(tree))

    out = {}
    for name, (inner, gather) in transforms.items():
        if only is not None and name not in only:
            continue
        tx = gradtx.parallel.sharded_state(inner, "data", gather_state=gather)
        init = jax.shard_map(tx.init, mesh=mesh, in_specs=P(), out_specs=P("data"))
        state = jax.eval_shape(init, params)

        def step(p, s, g, tx=tx):
            updates, s = tx.update(jax.tree.map(lambda x: x[0], g), s, p)
            return gradtx.apply_updates(p, updates), s

        mapped = jax.shard_map(
            step, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P("data"))
        )
        hlo = jax.jit(mapped, donate_argnums=(0, 1)).lower(params, state, grads).compile().as_text()
        out[name] = {
            "unsharded": nbytes(jax.eval_shape(inner.init, params)),
            "per_device": nbytes(state) // 8,  # every leaf has 8 rows, one per device
            "gather_state": gather,
            "collectives": count(hlo),
            "collective_bytes": whole_bytes(hlo, 8),
        }
    return {"tree": f"{layers} layers of w {rows}x{cols}, b {cols}, ln {rows}, replicated", "rows": out}


SIZES = {"full": (6, 256, 512), "smoke": (2, 8, 16, ("adam", "clip_by_global_norm + adamw", "muon"))}
"""`_measure`'s arguments: the smoke run (the suite's) counts an element-wise rule, a global norm and a
matrix rule's path."""


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sharding", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", choices=sorted(SIZES), default="full")
    parser.add_argument("--json", type=pathlib.Path, required=True, help="where to write the counts")
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_num_cpu_devices", 8)  # before the first JAX operation of this process
    result = measure(args.sizes)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


def measure(sizes: str) -> dict:
    """The counts, the state bytes and the pod table, in a process that has 8 devices."""
    from benchmarks import pod

    layers, rows, cols, *only = SIZES[sizes]
    result = _measure(*SIZES[sizes])
    smoke = ("adam", "adafactor") if only else None
    result["zero_in_shard_map"] = _zero_in_shard_map(layers, rows, cols, smoke)
    result["matrix_work"] = pod.measure(*pod.SIZES[sizes])
    return result


if __name__ == "__main__":
    main()
