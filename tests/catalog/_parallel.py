"""`gradtx.parallel`: wrappers whose `update` runs inside `jax.shard_map` / `jax.pmap` over `axis_name`."""

from __future__ import annotations

from gradtx import optimizers, parallel
from tests.catalog._entries import CONTRIB, TF1, Entry, register

_SGD = optimizers.sgd(0.1)
register(
    Entry(
        "cross_shard",
        parallel.cross_shard,
        "wrapper",
        aliases=("CrossShardOptimizer",),
        example={"tx": _SGD, "axis_name": "data"},
        reference="tf.contrib.tpu.CrossShardOptimizer",
    )
)
register(
    Entry(
        "tower_reduce",
        parallel.tower_reduce,
        "wrapper",
        aliases=("TowerOptimizer",),
        example={"tx": _SGD, "axis_name": "data"},
        reference="tf.contrib.estimator.TowerOptimizer (replicate_model_fn)",
    )
)
register(
    Entry(
        "sync_replicas",
        parallel.sync_replicas,
        "wrapper",
        aliases=("SyncReplicasOptimizer", "SyncReplicas"),
        example={"tx": _SGD, "axis_name": "data", "replicas_to_aggregate": 1},
        reference=f"{TF1}.SyncReplicasOptimizer",
        sparse="dense",
        nonfinite="skipped",  # a replica's non-finite gradient is dropped (`replica_ok`)
    )
)
register(
    Entry(
        "model_average",
        parallel.model_average,
        "wrapper",
        aliases=("ModelAverageOptimizer",),
        example={"tx": _SGD, "axis_name": "data", "interval_steps": 2},
        reference=f"{CONTRIB}.ModelAverageOptimizer",
        sparse="custom",
    )
)
register(
    Entry(
        "elastic_average",
        parallel.elastic_average,
        "wrapper",
        aliases=("ElasticAverageOptimizer",),
        example={"tx": _SGD, "axis_name": "data", "communication_period": 2, "moving_rate": 0.1, "rho": 0.05},
        reference=f"{CONTRIB}.ElasticAverageOptimizer",
        sparse="custom",
    )
)
register(
    Entry(
        "agn",
        parallel.agn,
        "wrapper",
        aliases=("AGNOptimizer",),
        example={"tx": _SGD, "axis_name": "data", "communication_period": 2},
        reference=f"{CONTRIB}.AGNOptimizer",
        sparse="custom",
    )
)
register(
    Entry(
        "drop_stale_gradients",
        parallel.drop_stale_gradients,
        "wrapper",
        aliases=("DropStaleGradientOptimizer", "DropStaleGradient"),
        example={"tx": _SGD, "staleness": 1},
        extra_args=lambda t: {"grad_step": t},
        reference=f"{CONTRIB}.DropStaleGradientOptimizer",
    )
)
register(
    Entry(
        "sharded_state",
        parallel.sharded_state,
        "wrapper",
        aliases=("ZeRO1",),
        example={"tx": _SGD, "axis_name": "data"},
        reference="ZeRO stage 1 (beyond the seeds)",
        sparse="dense",
    )
)
