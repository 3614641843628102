"""The combinators (`gradtx.combinators`): clipping, gradient edits, masks, wrappers."""

from __future__ import annotations

import jax

from gradtx import combinators, optimizers
from gradtx._core import walk as _walk
from tests.catalog._entries import BOUNDS_INF, transform, wrapper


def _halve(grads, params):
    """An example `transform_gradients` function: halve every gradient (row-sparse ones in their values)."""
    del params
    return jax.tree.map(
        lambda g: g.with_values(g.values / 2) if _walk.is_row_sparse(g) else g / 2,
        grads,
        is_leaf=_walk.is_row_sparse,
    )


def _by_rank(params):
    """An example `partition` labelling: matrices and vectors/scalars."""
    return jax.tree.map(lambda p: "matrices" if len(p.shape) >= 2 else "vectors", params)


transform("clip_variables", combinators.clip_variables, {"max_norm": 1.0, "dims": {"kernel": [1]}})
# TF clips an IndexedSlices by its values as they are (duplicates included): "values".
transform("clip", combinators.clip, {"max_delta": 0.5}, sparse="values", nonfinite=BOUNDS_INF)
transform("clip_by_norm", combinators.clip_by_norm, {"max_norm": 0.5}, sparse="values")
transform("clip_by_global_norm", combinators.clip_by_global_norm, {"max_norm": 0.5}, sparse="values")
transform("transform_gradients", combinators.transform_gradients, {"fn": _halve})
transform("add_noise", combinators.add_noise, {"scale": 0.01, "seed": 0}, sparse="dense")
transform("scale_gradients", combinators.scale_gradients, {"multipliers": {"kernel": 0.5, "bias": 2.0}})
transform("add_decayed_weights", combinators.add_decayed_weights, {"weight_decay": 0.01})
transform("freeze", combinators.freeze, {"mask": ["bias"]})
wrapper("masked", combinators.masked, {"inner": optimizers.sgd(0.1), "mask": ["kernel"]})
wrapper(
    "partition",
    combinators.partition,
    {
        "transforms": {"matrices": optimizers.sgd(0.1), "vectors": optimizers.momentum(0.05, 0.9)},
        "param_labels": _by_rank,
    },
)
wrapper(
    "accumulate_gradients",
    combinators.accumulate_gradients,
    {"tx": optimizers.momentum(0.05, 0.9), "every_k": 2},
    sparse="dense",
)
wrapper(
    "apply_if_finite",
    combinators.apply_if_finite,
    {"tx": optimizers.adam(0.05), "max_consecutive_errors": 3},
    sparse="all_rows",
    nonfinite="skipped",
)
wrapper(
    "decoupled_weight_decay",
    combinators.decoupled_weight_decay,
    {"tx": optimizers.momentum(0.05, 0.9), "weight_decay": 0.01},
)
wrapper(
    "moving_average",
    combinators.moving_average,
    {"tx": optimizers.sgd(0.1), "average_decay": 0.9, "num_updates": True},
)
