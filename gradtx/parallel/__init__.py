"""Data-parallel semantics as transforms: the only package of gradtx that uses collectives.

Every wrapper takes an inner transform and an `axis_name`, and its `update` runs inside
the mapped function -- `jax.shard_map` (with `check_vma=True` or `False`) or `jax.pmap` --
on each replica's own gradients. Outside a mapped axis it raises a `ValueError` (TF: "not
within a tpu_shard_context"). Only JAX collectives are used, so the same code runs on the
devices of one host and across hosts (`jax.distributed`).

- `cross_shard`, `tower_reduce`: reduce the gradients, apply `tx` once (synchronous SGD).
- `sync_replicas`: R valid replica gradients taken in turn (backups, failures, stale ones
  dropped; accumulated across steps when fewer arrive); `drop_stale_gradients`.
- `model_average`, `elastic_average`, `agn`: local steps, periodic communication.
- `sharded_state`: ZeRO-1, each replica keeps 1/N of the optimizer state (inside
  `shard_map`, or under plain `jax.jit` with a mesh); `unshard_state` / `shard_state` move
  its state to another number of devices; `restore_target` gives a checkpoint's target on
  another mesh (orbax restores into it).
- `split_matrix_work`: each device computes the per-matrix work (Muon's Newton-Schulz, ...) of
  1/N of the matrices, the results gathered once.
- `offloaded_state`: the optimizer state in host memory between steps (JAX memory kinds), brought
  to the devices for each step (with `sharded_state`: 1/N of it per device, on its host).
- `step_deadline`: a watchdog around a step of a multi-process run; a process whose step
  does not finish in time (a hung peer blocks every collective) exits with a clear message.

What the gradients are is part of the contract: each replica's own (TF's per-shard
loss). Under `jax.shard_map(..., check_vma=True)` differentiate with respect to
`per_replica(params, axis_name)` to get them; the gradient of a replicated parameter itself
comes out already combined by autodiff -- summed, or averaged if the loss was `pmean`-ed --
and the reducing wrappers refuse it unless `replicated_grads="sum"` or `"mean"` says which.

Under `check_vma=True`, the state `init` makes has the type of the params it is given:
replicated params give a replicated state (synchronous training), per-replica params a
state that varies over the same axes (local steps), so the state is a valid `lax.scan`
carry either way.

A minimal data-parallel train step: the batch is split over the mesh axis "data", the
parameters and the optimizer state are replicated, each replica differentiates its own
loss, and `cross_shard` averages the gradients:

    >>> import jax, jax.numpy as jnp, numpy as np, gradtx
    >>> from jax.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
    >>> tx = gradtx.parallel.cross_shard(gradtx.adam(0.05), "data")
    >>> def loss(params, x, y):
    ...     return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)
    >>> @jax.jit
    ... @jax.shard_map(mesh=mesh, in_specs=(P(), P(), P("data"), P("data")), out_specs=(P(), P(), P()))
    ... def train_step(params, opt_state, x, y):
    ...     own = gradtx.parallel.per_replica(params, "data")  # each replica's own gradient
    ...     value, grads = jax.value_and_grad(loss)(own, x, y)
    ...     updates, opt_state = tx.update(grads, opt_state, params)
    ...     return gradtx.apply_updates(params, updates), opt_state, jax.lax.pmean(value, "data")
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((64, 3)).astype(np.float32)
    >>> y = x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.3
    >>> x, y = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (x, y))
    >>> params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    >>> opt_state = tx.init(params)
    >>> for _ in range(300):  # (waiting for each step: XLA:CPU's simulated devices can deadlock otherwise)
    ...     params, opt_state, value = jax.block_until_ready(train_step(params, opt_state, x, y))
    >>> bool(value < 1e-3), np.round(np.asarray(params["w"]), 2).tolist()
    (True, [1.0, -2.0, 0.5])
"""

from gradtx.parallel._agn import AGNState, Pull, agn
from gradtx.parallel._averaging import ElasticAverageState, ModelAverageState, elastic_average, model_average
from gradtx.parallel._cross_shard import (
    axis_size,
    cross_shard,
    mean_over,
    per_replica,
    replica_key,
    tower_reduce,
)
from gradtx.parallel._deadline import step_deadline
from gradtx.parallel._matrix_work import split_matrix_work
from gradtx.parallel._offload import offloaded_state
from gradtx.parallel._restore import restore_target
from gradtx.parallel._sharded import sharded_state
from gradtx.parallel._sharded_layout import ShardedState, shard_state, unshard_state
from gradtx.parallel._sync import (
    DropStaleGradientsState,
    SyncReplicasState,
    drop_stale_gradients,
    sync_replicas,
)

__all__ = [
    "AGNState",
    "DropStaleGradientsState",
    "ElasticAverageState",
    "ModelAverageState",
    "Pull",
    "ShardedState",
    "SyncReplicasState",
    "agn",
    "axis_size",
    "cross_shard",
    "drop_stale_gradients",
    "elastic_average",
    "mean_over",
    "model_average",
    "offloaded_state",
    "per_replica",
    "replica_key",
    "restore_target",
    "shard_state",
    "sharded_state",
    "split_matrix_work",
    "step_deadline",
    "sync_replicas",
    "tower_reduce",
    "unshard_state",
]
