"""optax's `contrib.reduce_on_plateau` under its signature and state layout: gradtx's rule inside.

No math of its own: `gradtx.reduce_on_plateau`'s rule (gradtx/combinators/_plateau.py) filling
optax's `ReduceLROnPlateauState`, whose `count` is the number of losses averaged since the last
check (gradtx's state calls it `accumulated`). optax has these in `optax.contrib` only, so they
are not at `gradtx.optax_compat`'s top level. optax's stateful schedules (`StatefulSchedule`,
`WrappedSchedule`, `inject_stateful_hyperparams`) are `optax_compat`'s `inject_hyperparams`
(_inject.py), also at `gradtx.optax_compat.schedules`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import _plateau


class ReduceLROnPlateauState(NamedTuple):
    """State of `reduce_on_plateau` (optax's layout)."""

    scale: jax.Array  # the factor the updates are multiplied by (starts at 1)
    best_value: jax.Array  # the best mean loss so far (starts at inf)
    plateau_count: jax.Array  # int32: checks without improvement since the last improvement or drop
    cooldown_count: jax.Array  # int32: checks left in the cooldown after a drop
    count: _protocol.Count  # int32: losses averaged since the last check (not the number of updates)
    avg_value: jax.Array  # their mean


@_factory.api
def reduce_on_plateau(
    factor: float = 0.1,
    patience: int = 10,
    rtol: float = 1e-4,
    atol: float = 0.0,
    cooldown: int = 0,
    accumulation_size: int = 1,
    min_scale: float = 0.0,
) -> _protocol.GradientTransformation:
    """optax's `contrib.reduce_on_plateau`: `gradtx.reduce_on_plateau` with optax's state layout.

    Multiply the updates by a scale that drops by `factor` after `patience` means of
    `accumulation_size` losses without improvement; pass the loss to each step as
    `tx.update(grads, state, params, value=loss)`. The math is on `gradtx.reduce_on_plateau`.
    Unlike optax's, the arguments are checked here (optax checks `factor`, `rtol` and `atol`
    only): `patience` and `accumulation_size` are ints >= 1, `cooldown` an int >= 0,
    `min_scale` >= 0.

    Args:
      factor: the factor the scale is multiplied by at a plateau, in (0, 1).
      patience: how many checks without improvement make a plateau (an int >= 1).
      rtol: the relative improvement a mean must make on the best one, in [0, 1].
      atol: the absolute improvement a mean must make on the best one (>= 0; not both 0).
      cooldown: how many checks after a drop neither count nor drop (an int >= 0).
      accumulation_size: how many losses are averaged per check (an int >= 1).
      min_scale: the scale never drops below this (>= 0).

    Returns:
      A transform with state `ReduceLROnPlateauState(scale, best_value, plateau_count,
      cooldown_count, count, avg_value)`, its `update` needing the extra argument `value`.

    Raises:
      ValueError / TypeError: as `gradtx.reduce_on_plateau`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _stateful
        >>> tx = _stateful.reduce_on_plateau(factor=0.5, patience=1)
        >>> state = tx.init(jnp.zeros(1))
        >>> for loss in (1.0, 1.0):
        ...     updates, state = tx.update(jnp.ones(1), state, value=loss)
        >>> updates, state.scale
        (Array([0.5], dtype=float32), Array(0.5, dtype=float32))

    References:
      `optax.contrib.reduce_on_plateau` (optax/contrib/_reduce_on_plateau.py).
    """
    return _plateau.plateau_rule(
        "reduce_on_plateau",
        ReduceLROnPlateauState,
        "count",
        factor,
        patience,
        rtol,
        atol,
        cooldown,
        accumulation_size,
        min_scale,
    )
