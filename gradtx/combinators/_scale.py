"""Multipliers: `scale` (by a constant or schedule), `scale_by_schedule`, `scale_by_learning_rate` (the sign
flip)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import update_rule


class ScaleByScheduleState(NamedTuple):
    """State of a scaling whose factor is a schedule."""

    count: _protocol.Count  # int32: completed updates


def _scaled_leaf(g, h, *, sign: float):
    """`sign * factor * g`: the factor is cast to the leaf's dtype (a Python number meets `g` weakly)."""
    return ((sign * h.factor) * g,)


def _scaled_rows(g, h, *, sign: float):
    """A row-sparse update keeps its rows (duplicates too): only its values are scaled."""
    return (g.with_values((sign * h.factor) * g.values),)


def _scaled(fn: str, factor: Any, sign: float) -> _protocol.GradientTransformation:
    """Multiply every update by `sign * factor`, with `count` in the state when `factor` is a schedule."""
    return update_rule(
        fn,
        ScaleByScheduleState,
        functools.partial(_scaled_leaf, sign=sign),
        hyper={"factor": factor},
        sparse=functools.partial(_scaled_rows, sign=sign),
        count="if_scheduled",
    )


@_registry.transform()
def scale(step_size: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""Multiply every update by `step_size`.

    .. math:: u \leftarrow s_t \, u

    Args:
      step_size: the factor: a number, a scalar array, or a schedule `count -> factor`.

    Returns:
      A `GradientTransformation`; its state is `EmptyState()`, or `ScaleByScheduleState`
      when `step_size` is a schedule.

    Raises:
      TypeError: if `step_size` is not a number, scalar array or schedule.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale(0.5)
        >>> tx.update(jnp.array([2.0, 4.0]), tx.init(None))[0]
        Array([1., 2.], dtype=float32)
    """
    _checks.check_hyperparam("scale", "step_size", step_size)
    return _scaled("scale", step_size, 1.0)


@_registry.transform()
def scale_by_schedule(step_size_fn: _protocol.Schedule) -> _protocol.GradientTransformation:
    r"""Multiply every update by `step_size_fn(count)`, where `count` is the number of completed steps.

    .. math:: u \leftarrow s(t-1) \, u \quad\text{in step } t

    Args:
      step_size_fn: a schedule `count -> factor` (see `gradtx.schedules`).

    Returns:
      A `GradientTransformation` with state `ScaleByScheduleState(count)`.

    Raises:
      TypeError: if `step_size_fn` is not callable.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_schedule(lambda count: 1.0 / (count + 1))
        >>> state = tx.init(None)
        >>> u, state = tx.update(jnp.ones(2), state)
        >>> u, state = tx.update(jnp.ones(2), state)
        >>> u
        Array([0.5, 0.5], dtype=float32)
    """
    _checks.check_callable("scale_by_schedule", "step_size_fn", step_size_fn)
    return _scaled("scale_by_schedule", step_size_fn, 1.0)


@_registry.transform()
def scale_by_learning_rate(
    learning_rate: _protocol.ScalarOrSchedule, *, flip_sign: bool = True
) -> _protocol.GradientTransformation:
    r"""Turn a descent direction into an update: multiply by `-learning_rate`.

    The last link of most optimizer chains, and the only transform that flips the sign
    (updates are *added* to params).

    .. math:: u \leftarrow -\eta_t \, u

    Args:
      learning_rate: the learning rate: a number, a scalar array, or a schedule
        `count -> rate` (TF's callable learning rate; inside step t it sees `count = t-1`).
      flip_sign: multiply by `-learning_rate` (default) or by `+learning_rate`.

    Returns:
      A `GradientTransformation`; its state is `EmptyState()`, or `ScaleByScheduleState`
      when `learning_rate` is a schedule.

    Raises:
      TypeError: if `learning_rate` is not a number, scalar array or schedule, or
        `flip_sign` is not a bool.
      ValueError: if `learning_rate` is negative or not finite.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_learning_rate(0.1)
        >>> tx.update(jnp.array([1.0, -2.0]), tx.init(None))[0]
        Array([-0.1,  0.2], dtype=float32)
    """
    _checks.check_learning_rate("scale_by_learning_rate", learning_rate)
    _checks.check_bool("scale_by_learning_rate", "flip_sign", flip_sign)
    return _scaled("scale_by_learning_rate", learning_rate, -1.0 if flip_sign else 1.0)


DESCEND = 1.0
"""The rate of the last `scale_by_learning_rate` for optimizers whose TF kernel uses the learning
rate inside its update (closed forms, proximal steps, RMSProp's momentum): their building block
takes the rate and outputs the descent step, and this link only turns that step into an update."""
