"""Matrix work on a pod: Muon's, PSGD Kron's, Shampoo's and SOAP's steps on 8 devices, their per-matrix
work (Newton-Schulz; Kron's factor update and preconditioning; Shampoo's statistics, roots and
preconditioning; SOAP's statistics, projections and eigenbasis) as GSPMD places it (Auto axes), repeated
on every device (Explicit axes), and split across the devices (`gradtx.parallel.split_matrix_work`);
and ZeRO-1 inside `jax.shard_map` (`sharded_state(tx, "data", gather_state=True)`: each device keeps 1/8 of
the state, gathers it for the step, and computes 1/8 of the matrices), from replicated params.

SOAP is timed on a step past its first (which only builds the eigenbases) that keeps its basis, as 9 of
10 of its steps do. Shampoo renews its roots every 10 steps (`svd_interval=10`) and is timed on a step
that keeps them: on 8 simulated CPU devices a step of 2048 x 2048 SVDs keeps some device threads from
an all-gather past XLA:CPU's rendezvous timeout (the process aborts). The FLOPs and collectives count
the compiled step, the renewal's branch included.

`benchmarks.sharding` calls `measure` in its process of 8 simulated CPU devices. The tree is the pod
issue's workload: `layers` layers of an `up` (rows x cols) and a `down` (cols x rows) matrix, each sharded
`P("data", None)` on a mesh of 8 devices `("data",)`. For each contender: the compiled step's FLOPs per
device (XLA's cost analysis), over the single-device step's FLOPs / 8; its collective instructions; and the
median wall time of a few steps (all 8 simulated devices share this machine's cores, so the time follows
the total work and the data moved, not one device's share).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.collectives import count

LR = 0.02
SHARD_MAP = "shard_map"
"""A contender's kind: ZeRO-1 inside `jax.shard_map` (the others': a mesh of that `AxisType`, `jax.jit`)."""
ZERO = "sharded_state({}, gather_state=True), shard_map"
KRON_LR = 0.001
SOAP_LR = 0.003
SHAMPOO_LR = 0.1


def _past_first_step(state: Any) -> Any:
    """`state` with each `count` field 1 instead of 0: SOAP's step then preconditions and keeps its basis,
    Shampoo's (its step 2) keeps its roots."""
    import jax

    def bump(s):
        return s._replace(count=s.count + 1) if hasattr(s, "_fields") and "count" in s._fields else s

    return jax.tree.map(bump, state, is_leaf=lambda s: hasattr(s, "_fields") and "count" in s._fields)


def measure(layers: int, rows: int, cols: int, optimizers: tuple[str, ...], steps: int = 3) -> dict[str, Any]:
    """The table's rows for `optimizers` (of `muon`, `psgd_kron`, `shampoo`, `soap`): `{contender: {flops,
    ratio, collectives, step_ms}}` and the workload."""
    import jax
    import numpy as np
    import optax
    import optax.contrib
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    import gradtx

    rng = np.random.default_rng(0)
    host = {
        f"layer{i}": {
            "up": rng.standard_normal((rows, cols)).astype(np.float32),
            "down": rng.standard_normal((cols, rows)).astype(np.float32),
        }
        for i in range(layers)
    }
    grads_host = jax.tree.map(lambda x: 0.01 * x, host)

    def flops(compiled):
        analysis = compiled.cost_analysis()
        return float((analysis[0] if isinstance(analysis, list) else analysis)["flops"])

    def held(tree):  # bytes of `tree` on its first device (the most any device holds, for an even layout)
        device = jax.devices()[0]
        shards = (s for x in jax.tree.leaves(tree) for s in x.addressable_shards)
        return sum(s.data.nbytes for s in shards if s.device == device)

    def run(tx, params, grads):
        return timed(jax.jit(tx.update), _past_first_step(tx.init(params)), params, grads)

    def run_zero(tx, mesh, params, grads):  # ZeRO-1 inside shard_map: each replica keeps 1/8 of the state
        zero = gradtx.parallel.sharded_state(tx, "data", gather_state=True)
        init = jax.shard_map(zero.init, mesh=mesh, in_specs=P(), out_specs=P("data"), check_vma=False)
        update = jax.shard_map(
            lambda g, s, p: zero.update(g, s, p),
            mesh=mesh,
            in_specs=(P(), P("data"), P()),
            out_specs=(P(), P("data")),
            check_vma=False,
        )
        return timed(jax.jit(update), _past_first_step(jax.jit(init)(params)), params, grads)

    def timed(step, state, params, grads):
        compiled = step.lower(grads, state, params).compile()
        state_bytes = held(jax.block_until_ready(step(grads, state, params))[1])  # then let go: memory
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            jax.block_until_ready(step(grads, state, params))
            times.append((time.perf_counter() - start) * 1e3)
        median = statistics.median(times)
        return {
            "flops": flops(compiled),
            "collectives": count(compiled.as_text()),
            "step_ms": median,
            "state_bytes": state_bytes,  # the state as a step returns it, on one device
        }

    def single_flops(tx):
        return flops(jax.jit(tx.update).lower(grads_host, _past_first_step(tx.init(host)), host).compile())

    split = gradtx.parallel.split_matrix_work
    families = {  # each optimizer: its single-device step, then its contenders on the 8 devices
        "muon": (
            lambda: gradtx.muon(LR),
            {
                "optax.contrib.muon, Auto axes": (AxisType.Auto, lambda: optax.contrib.muon(LR)),
                "muon, Auto axes": (AxisType.Auto, lambda: gradtx.muon(LR)),
                "muon, Explicit axes": (AxisType.Explicit, lambda: gradtx.muon(LR)),
                "split_matrix_work(muon), Auto axes": (AxisType.Auto, lambda: split(gradtx.muon(LR))),
                "split_matrix_work(muon), Explicit axes": (AxisType.Explicit, lambda: split(gradtx.muon(LR))),
                ZERO.format("muon"): (SHARD_MAP, lambda: gradtx.muon(LR)),
            },
        ),
        "psgd_kron": (  # the first steps: each updates the factors (probability 1 for 500 steps)
            lambda: gradtx.psgd_kron(KRON_LR),
            {
                "psgd_kron, Auto axes": (AxisType.Auto, lambda: gradtx.psgd_kron(KRON_LR)),
                "psgd_kron, Explicit axes": (AxisType.Explicit, lambda: gradtx.psgd_kron(KRON_LR)),
                "split_matrix_work(psgd_kron), Auto axes": (
                    AxisType.Auto,
                    lambda: split(gradtx.psgd_kron(KRON_LR)),
                ),
                "split_matrix_work(psgd_kron), Explicit axes": (
                    AxisType.Explicit,
                    lambda: split(gradtx.psgd_kron(KRON_LR)),
                ),
                ZERO.format("psgd_kron"): (SHARD_MAP, lambda: gradtx.psgd_kron(KRON_LR)),
            },
        ),
        "shampoo": (
            lambda: gradtx.shampoo(SHAMPOO_LR, svd_interval=10),
            {
                "shampoo, Auto axes": (AxisType.Auto, lambda: gradtx.shampoo(SHAMPOO_LR, svd_interval=10)),
                "shampoo, Explicit axes": (
                    AxisType.Explicit,
                    lambda: gradtx.shampoo(SHAMPOO_LR, svd_interval=10),
                ),
                "split_matrix_work(shampoo), Auto axes": (
                    AxisType.Auto,
                    lambda: split(gradtx.shampoo(SHAMPOO_LR, svd_interval=10)),
                ),
                "split_matrix_work(shampoo), Explicit axes": (
                    AxisType.Explicit,
                    lambda: split(gradtx.shampoo(SHAMPOO_LR, svd_interval=10)),
                ),
                ZERO.format("shampoo"): (SHARD_MAP, lambda: gradtx.shampoo(SHAMPOO_LR, svd_interval=10)),
            },
        ),
        "soap": (
            lambda: gradtx.soap(SOAP_LR),
            {
                "soap, Auto axes": (AxisType.Auto, lambda: gradtx.soap(SOAP_LR)),
                "soap, Explicit axes": (AxisType.Explicit, lambda: gradtx.soap(SOAP_LR)),
                "split_matrix_work(soap), Auto axes": (AxisType.Auto, lambda: split(gradtx.soap(SOAP_LR))),
                "split_matrix_work(soap), Explicit axes": (
                    AxisType.Explicit,
                    lambda: split(gradtx.soap(SOAP_LR)),
                ),
                ZERO.format("soap"): (SHARD_MAP, lambda: gradtx.soap(SOAP_LR)),
            },
        ),
    }
    rows_out = {}
    singles = {}
    for family in optimizers:
        make_single, contenders = families[family]
        single = singles[family] = single_flops(make_single())
        for name, (kind, make) in contenders.items():
            if kind == SHARD_MAP:  # data parallelism: the params and each replica's gradient replicated
                mesh = jax.make_mesh((8,), ("data",))
                row = run_zero(make(), mesh, *jax.device_put((host, grads_host), NamedSharding(mesh, P())))
                row["ratio"] = row["flops"] / (single / 8)
                rows_out[name] = row
                continue
            mesh = jax.make_mesh((8,), ("data",), axis_types=(kind,))
            with jax.set_mesh(mesh):
                rows_sharded = NamedSharding(mesh, P("data", None))
                placed = jax.tree.map(lambda x, s=rows_sharded: jax.device_put(x, s), (host, grads_host))
                row = run(make(), *placed)
            row["ratio"] = row["flops"] / (single / 8)
            rows_out[name] = row
    return {
        "workload": f"{layers} layers of {rows}x{cols} + {cols}x{rows} float32 matrices sharded "
        "P('data', None) over 8 devices",
        "single_device_gflop": {k: v / 1e9 for k, v in singles.items()},
        "rows": rows_out,
    }


SIZES = {"full": (8, 512, 2048, ("muon", "psgd_kron", "shampoo", "soap")), "smoke": (8, 32, 128, ("muon",))}
"""`measure`'s arguments: the smoke run (the suite's) takes Muon only, whose path is the same."""


def table(result: dict[str, Any]) -> list[str]:
    """The Markdown table of `measure`'s result."""
    lines = [
        "Muon's, PSGD Kron's, Shampoo's (`svd_interval=10`) and SOAP's steps on "
        f"{result['workload']} (single device: "
        + ", ".join(f"{k} {v:.1f} GFLOP" for k, v in result["single_device_gflop"].items())
        + "). GFLOP per device from XLA's cost analysis, over the single-device step's / 8; the compiled "
        "step's collective instructions as *all-gather / all-reduce / other*; the median step on this "
        "machine (8 simulated devices share its cores: the time follows the total work); the optimizer "
        "state a step returns, held by one device (its MiB). The `shard_map` rows are ZeRO-1 inside "
        "`jax.shard_map` from replicated params: each device keeps 1/8 of the state between steps, "
        "gathers it for the step and computes 1/8 of the matrices. Run by `python -m benchmarks.sharding`.",
        "",
        "| contender | GFLOP per device | / (single / 8) | collectives | step (ms) | state (MiB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in result["rows"].items():
        c = row["collectives"]
        other = sum(v for k, v in c.items() if k not in ("all-gather", "all-reduce"))
        state = f"{row['state_bytes'] / 2**20:.1f}" if "state_bytes" in row else ""
        lines.append(
            f"| {name} | {row['flops'] / 1e9:.1f} | {row['ratio']:.2f}x | "
            f"{c['all-gather']} / {c['all-reduce']} / {other} | {row['step_ms']:.0f} | {state} |"
        )
    return lines
