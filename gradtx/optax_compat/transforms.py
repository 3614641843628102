"""`optax.transforms` under `gradtx.optax_compat`: optax's names for its combinators and wrappers.

Every name here is the `gradtx.optax_compat` object of the same name (optax's signature,
state layout and numbers); this module only gives them optax's second address, so
`from optax import transforms` keeps working after `import gradtx.optax_compat as optax`.
A name optax has here and optax_compat lacks raises AttributeError saying so.
"""

from __future__ import annotations

from typing import Any

import gradtx.optax_compat as _compat
from gradtx import combinators
from gradtx.combinators import _conditional
from gradtx.optax_compat import _mirror

_OPTAX_NAMES = (
    "AddNoiseState ApplyIfFiniteState ConditionFn ConditionallyMaskState ConditionallyTransformState "
    "EmaState MaskedNode MaskedState MonitorState MultiSteps MultiStepsState NonNegativeParamsState "
    "PartitionState ShouldSkipUpdateFunction SnapshotState TraceState ZeroNansState "
    "adaptive_grad_clip add_decayed_weights add_noise apply_if_finite chain clip clip_by_block_rms "
    "clip_by_global_norm conditionally_mask conditionally_transform ema flatten freeze "
    "keep_params_nonnegative masked measure_with_ema monitor named_chain partition "
    "per_example_global_norm_clip per_example_layer_norm_clip selective_transform skip_large_updates "
    "skip_not_finite snapshot trace unitwise_clip unitwise_norm zero_nans "
).split()
"""`optax.transforms`' public names (optax 0.2.8)."""

_HERE_ONLY = {  # optax.transforms' names that optax has not at its top level
    "ConditionFn": _conditional.ConditionFn,  # `should_transform_fn(step, **extra_args) -> bool`
    "unitwise_clip": combinators.unitwise_clip,
    "unitwise_norm": combinators.unitwise_norm,
}
__all__ = [name for name in _OPTAX_NAMES if name in _compat.__all__ or name in _HERE_ONLY]


def __getattr__(name: str) -> Any:
    if name in _HERE_ONLY:
        return _HERE_ONLY[name]
    if name in __all__:
        return getattr(_compat, name)
    raise _mirror.missing("gradtx.optax_compat.transforms", name)
