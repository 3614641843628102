"""Rprop (optax's numbers): `scale_by_rprop`, `rprop`."""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import DESCEND, scale_by_learning_rate


class ScaleByRpropState(NamedTuple):
    """State of `scale_by_rprop`."""

    count: _protocol.Count  # int32: completed updates
    step_sizes: _protocol.Updates  # each element's step size (starts at learning_rate)
    prev_updates: _protocol.Updates  # the last update, step * sign(g), 0 after a sign change (starts at 0)


def _rprop_leaf(g, step, prev, h):
    """One leaf: `(update, step_sizes, prev_updates)`, the update being `prev_updates`."""
    agreement = g * prev
    grown = step * jnp.where(agreement > 0, h.eta_plus, h.eta_minus)
    bounded = jnp.minimum(jnp.maximum(grown, h.min_step_size), h.max_step_size)
    new_step = jnp.where(agreement == 0, step, bounded)
    update = jnp.where(agreement < 0, jnp.zeros_like(g), new_step.astype(g.dtype) * jnp.sign(g))
    return update, new_step, update


def _check_rprop(fn, learning_rate, eta_minus, eta_plus, min_step_size, max_step_size):
    _checks.check_positive(fn, "learning_rate", learning_rate)
    _checks.check_in_range(fn, "eta_minus", eta_minus, 0.0, 1.0, low_open=True, high_open=True)
    _checks.check_in_range(fn, "eta_plus", eta_plus, 1.0, math.inf)
    _checks.check_nonnegative(fn, "min_step_size", min_step_size)
    _checks.check_positive(fn, "max_step_size", max_step_size)
    if all(isinstance(x, numbers.Real) for x in (min_step_size, max_step_size)) and not (
        min_step_size <= max_step_size
    ):
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `min_step_size` must be <= `max_step_size`, "
            f"got {min_step_size!r} > {max_step_size!r}."
        )


@_registry.transform()
def scale_by_rprop(
    learning_rate: _protocol.ScalarOrSchedule,
    eta_minus: _protocol.ScalarOrSchedule = 0.5,
    eta_plus: _protocol.ScalarOrSchedule = 1.2,
    min_step_size: _protocol.ScalarOrSchedule = 1e-6,
    max_step_size: _protocol.ScalarOrSchedule = 50.0,
) -> _protocol.GradientTransformation:
    r"""Rprop's step: each element moves by its own step size in the direction of its gradient's sign.

    With :math:`p_t = g_t \cdot u_{t-1}` (the last update, :math:`u_0 = 0`):

    .. math::
        \Delta_t = \begin{cases} \min(\eta^+ \Delta_{t-1}, \Delta_{max}) & p_t > 0 \\
                   \max(\eta^- \Delta_{t-1}, \Delta_{min}) & p_t < 0 \\
                   \Delta_{t-1} & p_t = 0 \end{cases}, \qquad
        u_t = \begin{cases} 0 & p_t < 0 \\ \Delta_t \operatorname{sign}(g_t) & \text{otherwise}
              \end{cases}

    A gradient that keeps its sign grows the step; one that flips it (the last step jumped
    over a minimum) shrinks the step and skips the update, and the next step starts afresh
    (iRprop-). :math:`\Delta_0` is the learning rate. Rprop is meant for full-batch
    gradients: noise in the sign undoes the adaptation. The update is the step to descend
    along, not yet negated (`gradtx.rprop` does that). A row-sparse gradient is densified
    first (untouched rows: a zero gradient, which resets their last update). A gradient of
    +-inf is taken as its sign, NaN makes the update NaN; wrap in `apply_if_finite` to skip
    such steps.

    This is the rule `optax.scale_by_rprop` writes into its state (its step sizes and
    `prev_updates` are these); optax 0.2.8 returns the previous step's update instead of
    this one (one step late, zero at the first step), which gradtx does not copy.

    Args:
      learning_rate: the initial step size of every element, > 0 (a schedule is read once,
        at count 0: Rprop adapts its step sizes itself).
      eta_minus: the factor on a step after a sign change, in (0, 1).
      eta_plus: the factor on a step while the sign holds, >= 1.
      min_step_size: the smallest step size, >= 0.
      max_step_size: the largest step size, > 0 and >= `min_step_size`.

    Returns:
      An `ElementWise` transform with state `ScaleByRpropState(count, step_sizes, prev_updates)`.

    Raises:
      ValueError: for a factor or step size outside its range, or `min_step_size > max_step_size`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_rprop(learning_rate=0.1)
        >>> state = tx.init(jnp.zeros(2))
        >>> u, state = tx.update(jnp.array([1.0, -2.0]), state)
        >>> u, state.step_sizes  # the first step: the initial step size, along sign(g)
        (Array([ 0.1, -0.1], dtype=float32), Array([0.1, 0.1], dtype=float32))
        >>> tx.update(jnp.array([3.0, 1.0]), state)[0]  # same sign: x1.2; a flip: no step (and x0.5)
        Array([0.12, 0.  ], dtype=float32)

    References:
      Riedmiller, Braun, *A direct adaptive method for faster backpropagation learning: the
      RPROP algorithm*, IEEE ICNN 1993; Igel, Hüsken, *Improving the Rprop learning
      algorithm*, Second International ICSC Symposium on Neural Computation (NC 2000),
      2000 (iRprop-).
    """
    fn = "scale_by_rprop"
    _check_rprop(fn, learning_rate, eta_minus, eta_plus, min_step_size, max_step_size)

    return update_rule(
        fn,
        ScaleByRpropState,
        _rprop_leaf,
        hyper={
            "eta_minus": eta_minus,
            "eta_plus": eta_plus,
            "min_step_size": min_step_size,
            "max_step_size": max_step_size,
        },
        slots={"step_sizes": Slot(fill=learning_rate), "prev_updates": 0.0},
        real_only="it compares the signs of successive gradients",
    )


@_registry.optimizer("Rprop")
def rprop(
    learning_rate: _protocol.ScalarOrSchedule,
    eta_minus: _protocol.ScalarOrSchedule = 0.5,
    eta_plus: _protocol.ScalarOrSchedule = 1.2,
    min_step_size: _protocol.ScalarOrSchedule = 1e-6,
    max_step_size: _protocol.ScalarOrSchedule = 50.0,
) -> _protocol.GradientTransformation:
    r"""Rprop (iRprop-): per-element step sizes that grow while the gradient keeps its sign, shrink on a flip.

    `chain(scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size, max_step_size),
    scale_by_learning_rate(1.0))`: `optax.rprop`'s chain and defaults, applying the current
    step's update as the paper and `torch.optim.Rprop` do (optax 0.2.8 applies the previous
    step's, see `scale_by_rprop`). `learning_rate` is the initial step size. Use it with
    full-batch gradients. A row-sparse gradient is densified. A gradient of +-inf is taken
    as its sign, NaN reaches the params; wrap in `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the initial step size of every element, > 0 (a schedule is read once, at count 0).
      eta_minus: the factor on a step after a sign change, in (0, 1).
      eta_plus: the factor on a step while the sign holds, >= 1.
      min_step_size: the smallest step size, >= 0.
      max_step_size: the largest step size, > 0 and >= `min_step_size`.

    Returns:
      An `ElementWise` chain; its slots are `step_sizes` and `prev_updates`.

    Raises:
      ValueError: for a factor or step size outside its range, or `min_step_size > max_step_size`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.rprop(0.1)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([3.0, -1e-4]), tx.init(params), params)[0]  # -step sign(g)
        Array([-0.1,  0.1], dtype=float32)

    References:
      Riedmiller, Braun, *A direct adaptive method for faster backpropagation learning: the
      RPROP algorithm*, IEEE ICNN 1993; Igel, Hüsken, *Improving the Rprop learning
      algorithm*, NC 2000.
    """
    return chain(
        scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size, max_step_size),
        scale_by_learning_rate(DESCEND),
    )


__all__ = ["ScaleByRpropState", "rprop", "scale_by_rprop"]
