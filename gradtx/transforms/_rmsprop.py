"""RMSProp: `scale_by_rmsprop`, TF's `ApplyRMSProp` / `ApplyCenteredRMSProp` kernels."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core.rule import update_rule


class ScaleByRmspropState(NamedTuple):
    """State of `scale_by_rmsprop`."""

    count: _protocol.Count  # int32: completed updates
    rms: _protocol.Updates  # TF slot "rms": mean square (starts at ONES, as TF1's RMSPropOptimizer)
    momentum: _protocol.Updates  # TF slot "momentum": the last step (starts at 0); None for momentum=None
    mg: _protocol.Updates  # TF slot "mg": mean gradient when centered (starts at 0), else None


def _rmsprop_leaf(g, rms, mom, mg, h, *, momentum_is_zero: bool):
    """ApplyRMSProp (ApplyCenteredRMSProp when `mg` is kept): the step, the new `rms`, `momentum`, `mg`."""
    rms = _formulas.moment_increment(rms, _formulas.abs_sq(g), h.decay)
    if mg is not None:
        mg = _formulas.moment_increment(mg, g, h.decay)
        denom = (rms - _formulas.abs_sq(mg)) + h.eps
    else:
        denom = rms + h.eps
    step = (g * h.learning_rate) / jnp.sqrt(denom)
    if mom is None:  # momentum=None: no momentum slot
        return step, rms, None, mg
    mom = step if momentum_is_zero else mom * h.momentum + step  # a literal 0 does not read the slot
    return mom, rms, mom, mg


def _is_zero(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == 0


@_factory.api
def scale_by_rmsprop(
    learning_rate: _protocol.ScalarOrSchedule,
    decay: _protocol.ScalarOrSchedule = 0.9,
    momentum: _protocol.ScalarOrSchedule | None = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-10,
    *,
    centered: bool = False,
) -> _protocol.GradientTransformation:
    r"""RMSProp as TF1 computes it (rate and momentum inside the kernel); outputs the descent step.

    .. math::
        s_t = s_{t-1} + (g_t^2 - s_{t-1})(1-\rho), \quad
        \mu_t = m\,\mu_{t-1} + \frac{\eta\, g_t}{\sqrt{s_t + \epsilon}}, \quad w \mathrel{-}= \mu_t

    Centered: :math:`\bar g_t = \bar g_{t-1} + (g_t - \bar g_{t-1})(1-\rho)` and the
    denominator is :math:`\sqrt{(s_t - \bar g_t^2) + \epsilon}`. The `rms` slot starts at
    ones (TF1's `RMSPropOptimizer`), `momentum` and `mg` at zeros. The learning rate sits
    inside the momentum accumulator, so it is an argument here and an alias follows this
    block with `scale_by_learning_rate(1.0)`. Row-sparse gradients change the touched
    rows only (`SparseApply[Centered]RMSProp`).

    TF keeps the `momentum` slot (the last step) even at momentum 0: checkpoints and the
    parity tests read it, and writing it costs a pass over the params per step.
    `momentum=None` (optax's default) keeps no momentum slot: the same updates as 0, with
    optax's memory traffic, but a TF1 checkpoint of the state lacks TF's `momentum` slot.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      decay: the discount of the mean square, :math:`\rho \in [0, 1]`.
      momentum: the momentum :math:`m \in [0, 1]`, or None for no momentum slot.
      eps: added to the mean square inside the root, >= 0.
      centered: divide by the centered (variance) estimate.

    Returns:
      A `GradientTransformation` with state `ScaleByRmspropState(count, rms, momentum, mg)`
      (`mg` is None unless centered, `momentum` None for `momentum=None`).

    Raises:
      ValueError: for a decay or momentum outside [0, 1], a negative rate or epsilon.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_rmsprop(learning_rate=0.1, decay=0.5, eps=0.0)
        >>> u, state = tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))
        >>> float(state.rms[0]), round(float(u[0]), 6)  # rms: 1 + (9 - 1) / 2; step: 0.1 * 3 / sqrt(5)
        (5.0, 0.134164)

    References:
      Tieleman, Hinton, *Lecture 6.5 - RMSProp*, COURSERA: Neural Networks for Machine
      Learning, 2012; Graves, *Generating sequences with recurrent neural networks*, 2013
      (centered).
    """
    fn = "scale_by_rmsprop"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0)
    if momentum is not None:
        _checks.check_in_range(fn, "momentum", momentum, 0.0, 1.0)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "centered", centered)
    hyper = {"learning_rate": learning_rate, "decay": decay, "eps": eps}
    if momentum is not None:
        hyper["momentum"] = momentum

    return update_rule(
        fn,
        ScaleByRmspropState,
        functools.partial(_rmsprop_leaf, momentum_is_zero=_is_zero(momentum)),
        hyper=hyper,
        slots={"rms": 1.0, "momentum": None if momentum is None else 0.0, "mg": 0.0 if centered else None},
        sparse="rows",  # SparseApply[Centered]RMSProp: the touched rows only
        tf_scalars=True,
    )
