"""optax's remaining transforms and utilities under optax's names, signatures and state layouts.

`monitor` and `measure_with_ema` are gradtx's in optax's state layouts; the others are gradtx's own
functions, re-exported: their names, signatures, defaults, states
(`EmptyState()` unless an argument is a schedule, which optax does not take) and numbers are
optax's already. `unitwise_norm` and `unitwise_clip` are `optax.transforms` names, not top-level
ones, so `gradtx.optax_compat` does not list them (this module has them).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.updates import incremental_update, periodic_update
from gradtx.combinators import (
    MonitorState,
    SnapshotState,
    microbatch,
    per_example_layer_norm_clip,
    snapshot,
    unitwise_clip,
    unitwise_norm,
)
from gradtx.transforms import centralize, normalize_by_update_norm, scale_by_param_block_norm

__all__ = [
    "MonitorState",
    "SnapshotState",
    "centralize",
    "incremental_update",
    "measure_with_ema",
    "microbatch",
    "monitor",
    "normalize_by_update_norm",
    "per_example_layer_norm_clip",
    "periodic_update",
    "scale_by_param_block_norm",
    "snapshot",
    "unitwise_clip",
    "unitwise_norm",
]


@_factory.api
def monitor(measures: Mapping[str, Any]) -> _protocol.GradientTransformation:
    """optax's `monitor`: `gradtx.monitor` whose `init` keeps no measurements yet, as optax's.

    optax's state changes structure at the first step (`measurements` is `{}` after `init`,
    then one entry per measure); gradtx's starts with zeros shaped like each measurement, so
    its state keeps one structure (a `lax.scan` carry). The measurements are equal.

    Args:
      measures: `{name: measure}`, a measure being a function of the updates or a transform.

    Returns:
      A `GradientTransformation` with state `MonitorState(measurements, measure_states)`.

    Raises:
      TypeError: for a non-dict `measures`, a non-string name, or a measure that is neither
        callable nor a transform.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.monitor({"norm": optax.tree.norm}).init(jnp.zeros(2))
        MonitorState(measurements={}, measure_states=(EmptyState(),))
    """
    tx = gradtx.monitor(measures)

    def init_fn(params):
        return tx.init(params)._replace(measurements={})

    return _protocol.GradientTransformation(init_fn, tx.update)


def measure_with_ema(
    measure: Callable[[Any], Any], decay: Any, debias: bool = True, accumulator_dtype: Any = None
) -> _protocol.GradientTransformation:
    """optax's `measure_with_ema`: `gradtx.measure_with_ema` with its average in optax's `EmaState`.

    Args:
      measure: a function of the updates returning a pytree of arrays.
      decay: the decay of the average, in [0, 1].
      debias: divide by `1 - decay^t`.
      accumulator_dtype: dtype of the average (default: the measurement's).

    Returns:
      A `GradientTransformation` with state `(EmptyState(), EmaState(count, ema))`.

    Raises:
      TypeError: for a non-callable measure or a non-bool `debias`.
      ValueError: for a decay outside [0, 1].

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.measure_with_ema(optax.tree.norm, 0.9).init(jnp.zeros(2))[1]
        EmaState(count=Array(0, dtype=int32), ema=Array(0., dtype=float32))
    """
    return gradtx.measure_with_ema(measure, decay, debias, accumulator_dtype, state=gradtx.EmaState)
