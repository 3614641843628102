"""optax's remaining transforms and wrappers (centralization, normalized steps, block norms, monitoring):
optax's numbers (`Entry.reference` names the optax function). `measure_with_ema` is not registered: its
`update` returns a measurement, not updates (`monitor`'s example holds one).

Not registered, as they are not transforms of a gradient tree: `per_example_layer_norm_clip` (its
gradients carry a leading batch axis), `unitwise_norm` / `unitwise_clip` (array functions),
`microbatch` (a function transformation), `periodic_update` / `incremental_update` (tree functions
for target networks), `gradtx.second_order` and `gradtx.projections`.
"""

from __future__ import annotations

from gradtx import combinators, transforms, tree
from tests.catalog._entries import Entry, register

OPTAX = "optax"
"""The module of optax's transforms, for `Entry.reference`."""


def _transform(name, factory, example, reference, sparse="rows", nonfinite="propagates"):
    register(
        Entry(
            name,
            factory,
            "transform",
            example=example,
            reference=f"{OPTAX}.{reference}",
            sparse=sparse,
            nonfinite=nonfinite,
        )
    )


# Row by row: each touched row is centred on its own, an untouched row stays 0.
_transform("centralize", transforms.centralize, {}, "centralize")
_transform(
    "normalize_by_update_norm",
    transforms.normalize_by_update_norm,
    {"scale_factor": 1.0, "eps": 1e-6},
    "normalize_by_update_norm",
    sparse="dense",
)
_transform(
    "scale_by_param_block_norm",
    transforms.scale_by_param_block_norm,
    {"min_scale": 1e-3},
    "scale_by_param_block_norm",
    sparse="dense",
)

# The updates pass on as they are (a row-sparse one too); the measures see them densified.
_transform("snapshot", combinators.snapshot, {"measure_name": "norm", "measure": tree.norm}, "snapshot")
_transform(
    "monitor",
    combinators.monitor,
    {"measures": {"norm": tree.norm, "norm_ema": combinators.measure_with_ema(tree.norm, 0.9)}},
    "monitor",
)
