"""gradtx: gradient transformations for JAX, with TensorFlow 1's optimizer catalogue and exact numbers.

Every optimizer is a pure `(init, update)` pair over pytrees (`GradientTransformation`,
structurally identical to optax's). Building blocks live in `gradtx.transforms`,
combinators in `gradtx.combinators`, the TF-named optimizers in `gradtx.optimizers`,
learning-rate schedules in `gradtx.schedules`, row-sparse gradients in `gradtx.sparse`,
packed parameters in `gradtx.packing`, optax's pytree utilities in `gradtx.tree`, optax's
numerics and linear algebra in `gradtx.numerics` and `gradtx.linalg`, RETURNN configs in
`gradtx.returnn`, and the name registry in `gradtx.registry`; the public names of the first
three are re-exported here. Beside the optimizers, what optax programs also use: optax's losses
in `gradtx.losses`, the Hungarian algorithm in `gradtx.assignment` and per-example gradient
aggregators in `gradtx.aggregating`.
"""

# ruff: noqa: F401  (this module re-exports)
from gradtx import (
    aggregating,
    assignment,
    checkpoint,
    combinators,
    linalg,
    losses,
    numerics,
    optimizers,
    packing,
    parallel,
    projections,
    registry,
    returnn,
    schedules,
    second_order,
    sparse,
    train,
    transforms,
    tree,
)
from gradtx._core.factory import with_extra_args_support
from gradtx._core.protocol import (
    ElementWise,
    EmptyState,
    GradientTransformation,
    LeafWise,
    MissingExtraArgError,
    OptState,
    Params,
    ScalarOrSchedule,
    Schedule,
    TreeMismatchError,
    UnknownNameError,
    Updates,
)
from gradtx._core.rule import Slot, update_rule
from gradtx._core.updates import apply_updates, incremental_update, periodic_update
from gradtx.combinators import *  # noqa: F401,F403  (names listed in combinators.__all__)
from gradtx.optimizers import *  # noqa: F401,F403
from gradtx.registry import from_config, get
from gradtx.returnn import from_returnn_config
from gradtx.slots import get_slot, slot_names, slots  # the function `slots` shadows its module's name
from gradtx.train import (
    OPTIMIZER_SUMMARIES,
    OptimizeLoss,
    OptimizeLossState,
    TrainState,
    apply_gradients,
    compute_gradients,
    minimize,
    optimize_loss,
)
from gradtx.transforms import *  # noqa: F401,F403

__version__ = "0.1.0"

OPTIMIZER_NAMES: tuple[str, ...] = registry.names("optimizer")
"""The gradtx names of the built-in optimizers, sorted (`registry.names("optimizer")` includes later
registrations)."""

__all__ = sorted(
    [
        "ElementWise",
        "EmptyState",
        "GradientTransformation",
        "LeafWise",
        "MissingExtraArgError",
        "OPTIMIZER_NAMES",
        "OPTIMIZER_SUMMARIES",
        "OptimizeLoss",
        "OptimizeLossState",
        "TrainState",
        "apply_gradients",
        "compute_gradients",
        "from_config",
        "from_returnn_config",
        "get_slot",
        "minimize",
        "optimize_loss",
        "slot_names",
        "slots",
        "train",
        "OptState",
        "Params",
        "ScalarOrSchedule",
        "Slot",
        "Schedule",
        "TreeMismatchError",
        "UnknownNameError",
        "Updates",
        "aggregating",
        "apply_updates",
        "assignment",
        "checkpoint",
        "combinators",
        "get",
        "incremental_update",
        "linalg",
        "losses",
        "numerics",
        "optimizers",
        "packing",
        "parallel",
        "periodic_update",
        "projections",
        "registry",
        "returnn",
        "schedules",
        "second_order",
        "sparse",
        "transforms",
        "tree",
        "update_rule",
        "with_extra_args_support",
    ]
    + combinators.__all__
    + optimizers.__all__
    + transforms.__all__
)
