"""A learning rate that drops when the loss stops improving: `reduce_on_plateau` (optax's contrib rule)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import rule_parts as _rule_parts
from gradtx._core import walk as _walk
from gradtx.tree import _dtypes


class ReduceOnPlateauState(NamedTuple):
    """State of `reduce_on_plateau`."""

    scale: jax.Array  # the factor the updates are multiplied by (starts at 1; params' lowest dtype)
    best_value: jax.Array  # the best mean loss so far (starts at inf; params' highest dtype)
    plateau_count: jax.Array  # int32: checks without improvement since the last improvement or drop
    cooldown_count: jax.Array  # int32: checks left before a plateau counts again after a drop
    accumulated: jax.Array  # int32: losses averaged since the last check, in [0, accumulation_size)
    avg_value: jax.Array  # their mean (params' highest dtype)


def _dtype_of(params: Any, which: str) -> Any:
    """`gradtx.tree.dtype(params, which)` of the float leaves (`ShapeDtypeStruct` ones too); integer
    params (which `update` refuses) count as the default float dtype."""
    dtypes = [jnp.result_type(p) for p in jax.tree.leaves(params)]
    return _dtypes.dtype([np.zeros((), d) for d in dtypes if jnp.issubdtype(d, jnp.inexact)], which)


def _check_tolerances(fn: str, rtol: Any, atol: Any) -> None:
    _checks.check_number(fn, "rtol", rtol)
    _checks.check_in_range(fn, "rtol", rtol, 0.0, 1.0)
    _checks.check_number(fn, "atol", atol)
    _checks.check_nonnegative(fn, "atol", atol)
    if isinstance(rtol, jax.core.Tracer) or isinstance(atol, jax.core.Tracer):
        _checks._defer(
            _checks.Interval(jnp.maximum(rtol, atol), low=0.0)
        )  # traced (inject_hyperparams): NaN if not
    elif float(rtol) == 0.0 and float(atol) == 0.0:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: at least one of `rtol` and `atol` must be > 0 (a loss counts as an "
            f"improvement when it is below (1 - rtol) * best - atol), got rtol={rtol!r} and atol={atol!r}."
        )


def plateau_rule(
    fn: str,
    state_cls: Any,
    accumulated_field: str,
    factor: Any,
    patience: int,
    rtol: Any,
    atol: Any,
    cooldown: int,
    accumulation_size: int,
    min_scale: Any,
) -> _protocol.GradientTransformation:
    """The rule of `reduce_on_plateau`, its state a `state_cls` whose count of averaged losses is named
    `accumulated_field` (gradtx's `accumulated`, optax's `count`); the other fields are optax's."""
    _checks.check_number(fn, "factor", factor)
    _checks.check_in_range(fn, "factor", factor, 0.0, 1.0, low_open=True, high_open=True)
    _check_tolerances(fn, rtol, atol)
    _checks.check_int(fn, "patience", patience, minimum=1)
    _checks.check_int(fn, "cooldown", cooldown, minimum=0)
    _checks.check_int(fn, "accumulation_size", accumulation_size, minimum=1)
    _checks.check_number(fn, "min_scale", min_scale)
    _checks.check_nonnegative(fn, "min_scale", min_scale)

    def init_fn(params):
        low, high = _dtype_of(params, "lowest"), _dtype_of(params, "highest")
        return state_cls(
            scale=jnp.asarray(1.0, low),
            best_value=jnp.asarray(jnp.inf, high),
            plateau_count=_hyper.zero_count(),
            cooldown_count=_hyper.zero_count(),
            avg_value=jnp.asarray(0.0, high),
            **{accumulated_field: _hyper.zero_count()},
        )

    def checked(state):
        """After `accumulation_size` losses: compare their mean with the best one, drop the scale after
        `patience` checks without improvement (none during a cooldown)."""
        improved = state.avg_value < (1 - rtol) * state.best_value - atol
        best = jnp.where(improved, state.avg_value.astype(state.best_value.dtype), state.best_value)
        plateau = jnp.where(improved, 0, _hyper.increment(state.plateau_count))
        in_cooldown = state.cooldown_count > 0
        drop = jnp.logical_and(jnp.logical_not(in_cooldown), plateau == patience)
        scale = jnp.maximum(jnp.where(drop, state.scale * factor, state.scale), min_scale)
        return state_cls(
            scale=jnp.where(in_cooldown, state.scale, scale).astype(state.scale.dtype),
            best_value=best.astype(state.best_value.dtype),
            plateau_count=jnp.where(in_cooldown | drop, 0, plateau).astype(jnp.int32),
            cooldown_count=jnp.where(
                in_cooldown, state.cooldown_count - 1, jnp.where(drop, cooldown, 0)
            ).astype(jnp.int32),
            avg_value=jnp.zeros_like(state.avg_value),
            **{accumulated_field: _hyper.zero_count()},
        )

    def update_fn(updates, state, params=None, *, value=None, **extra_args):
        del extra_args
        if value is None:
            raise _protocol.missing_extra_arg(fn, "value", "loss")
        leaves, _, treedef = _walk.flatten_updates(fn, updates)
        _rule_parts.refuse_integers(fn, updates, leaves, treedef, params, None)  # a scale < 1 rounds away
        count = getattr(state, accumulated_field)
        new_count = _hyper.increment(count)
        avg = (count * state.avg_value + jnp.asarray(value).astype(state.avg_value.dtype)) / new_count
        state = state._replace(avg_value=avg.astype(state.avg_value.dtype), **{accumulated_field: new_count})
        new = checked(state)
        state = jax.tree.map(lambda a, b: jnp.where(new_count == accumulation_size, a, b), new, state)
        scale = state.scale
        out = _walk.map_updates(
            fn,
            lambda g: (
                g.with_values(scale.astype(g.values.dtype) * g.values)
                if _walk.is_row_sparse(g)
                else scale.astype(g.dtype) * g
            ),
            updates,
        )
        return out, state

    return _protocol.ElementWise(init_fn, update_fn)


@_registry.transform()
def reduce_on_plateau(
    factor: float = 0.1,
    patience: int = 10,
    rtol: float = 1e-4,
    atol: float = 0.0,
    cooldown: int = 0,
    accumulation_size: int = 1,
    min_scale: float = 0.0,
) -> _protocol.GradientTransformation:
    r"""Multiply the updates by a scale that drops by `factor` when the loss stops improving.

    `optax.contrib.reduce_on_plateau`'s rule (Keras' `ReduceLROnPlateau` as a transform):
    chain it after an optimizer and pass the loss to every step,
    `tx.update(grads, state, params, value=loss)`. The losses are averaged in groups of
    `accumulation_size` (1 for a validation loss given once per evaluation; more for noisy
    minibatch losses). After each group, with :math:`\bar v` the group's mean and :math:`b`
    the best mean so far:

    .. math::
        \text{improved} = \bar v < (1 - \text{rtol})\, b - \text{atol}, \qquad
        b \leftarrow \bar v \text{ if improved}

    and the plateau count (groups without improvement) is reset on improvement, else
    incremented; when it reaches `patience` (outside a cooldown) the scale becomes
    :math:`\max(\text{scale} \cdot \text{factor}, \text{min\_scale})`, the count restarts
    and the next `cooldown` groups neither count nor drop. The scale changes only after a
    full group; the step's updates are multiplied by the scale after that step's check. The
    numbers are optax's (`optax_compat.contrib`'s `reduce_on_plateau` is this rule with
    optax's state layout); the state keeps the scale in the params' lowest float dtype and the
    losses in their highest, as optax does.

    Args:
      factor: the factor the scale is multiplied by at a plateau, in (0, 1).
      patience: how many groups without improvement make a plateau (an int >= 1).
      rtol: the relative improvement a mean must make on the best one, in [0, 1].
      atol: the absolute improvement a mean must make on the best one (>= 0; `rtol` and
        `atol` are not both 0).
      cooldown: how many groups after a drop neither count towards a plateau nor drop (an int >= 0).
      accumulation_size: how many losses are averaged per group (an int >= 1).
      min_scale: the scale never drops below this (>= 0).

    Returns:
      An `ElementWise` `GradientTransformation` with state `ReduceOnPlateauState(scale,
      best_value, plateau_count, cooldown_count, accumulated, avg_value)` whose `update`
      needs the extra argument `value` (the loss: a scalar).

    Raises:
      ValueError: for a `factor` outside (0, 1), an `rtol` outside [0, 1], a negative `atol`
        or `min_scale`, `rtol` and `atol` both 0, a `patience` or `accumulation_size` below 1,
        a negative `cooldown`; `TypeError` for a non-integer `patience`, `cooldown` or
        `accumulation_size`, or a schedule; at update time, `MissingExtraArgError` without `value`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.sgd(1.0), gradtx.reduce_on_plateau(factor=0.5, patience=2))
        >>> state = tx.init(jnp.zeros(1))
        >>> for loss in (3.0, 2.0, 2.0, 2.0):  # two checks without improvement: a plateau
        ...     updates, state = tx.update(jnp.ones(1), state, value=loss)
        >>> updates, float(state[1].scale)
        (Array([-0.5], dtype=float32), 0.5)

    References:
      `optax.contrib.reduce_on_plateau` (optax/contrib/_reduce_on_plateau.py);
      `tf.keras.callbacks.ReduceLROnPlateau`.
    """
    return plateau_rule(
        "reduce_on_plateau",
        ReduceOnPlateauState,
        "accumulated",
        factor,
        patience,
        rtol,
        atol,
        cooldown,
        accumulation_size,
        min_scale,
    )
