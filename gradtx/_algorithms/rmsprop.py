"""RMSProp: TF's (`scale_by_rmsprop`, `rmsprop`) and torch's rule.

optax's forms (`scale_by_rms`, `scale_by_stddev`, `scale_by_bias_corrected_rms`) are in `rmsprop_optax.py`,
whose names this module re-exports.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY
from gradtx._algorithms.rmsprop_optax import ScaleByBiasCorrectedRmsState as ScaleByBiasCorrectedRmsState
from gradtx._algorithms.rmsprop_optax import ScaleByRmsState as ScaleByRmsState
from gradtx._algorithms.rmsprop_optax import ScaleByRStdDevState as ScaleByRStdDevState
from gradtx._algorithms.rmsprop_optax import scale_by_bias_corrected_rms as scale_by_bias_corrected_rms
from gradtx._algorithms.rmsprop_optax import scale_by_rms as scale_by_rms
from gradtx._algorithms.rmsprop_optax import scale_by_stddev as scale_by_stddev
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import SQUARES, Slot, update_rule
from gradtx.combinators._scale import DESCEND, scale_by_learning_rate


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


@_registry.transform()
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
        slots={
            "rms": Slot(1.0, nonnegative=True),
            "momentum": None if momentum is None else 0.0,
            "mg": 0.0 if centered else None,
        },
        sparse="rows",  # SparseApply[Centered]RMSProp: the touched rows only
        tf_scalars=True,
    )


@_registry.optimizer("RMSProp")
def rmsprop(
    learning_rate: _protocol.ScalarOrSchedule,
    decay: _protocol.ScalarOrSchedule = 0.9,
    momentum: _protocol.ScalarOrSchedule | None = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-10,
    *,
    centered: bool = False,
) -> _protocol.GradientTransformation:
    r"""RMSProp: TF's `RMSPropOptimizer` (its kernel and slots), not `optax.rmsprop` (`optax_compat.rmsprop`).

    TF1's defaults and slot initial values: `rms` starts at ONES, `momentum` and `mg` at
    zeros. This is `chain(scale_by_rmsprop(...), scale_by_learning_rate(1.0))`: the rate
    sits inside TF's momentum accumulator. Row-sparse gradients change the touched rows
    only. TF keeps the `momentum` slot (the last step) at momentum 0 too; `momentum=None`
    (optax's default) keeps none: the same updates, one pass over the params less per step,
    but no TF `momentum` slot in a TF1 checkpoint.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      decay: the discount of the mean square, in [0, 1].
      momentum: the momentum, in [0, 1], or None for no momentum slot.
      eps: added to the mean square inside the root, >= 0.
      centered: divide by the centered (variance) estimate.

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are
      `rms`, `momentum` and, when centered, `mg`.

    Raises:
      ValueError: for a decay or momentum outside [0, 1], a negative rate or epsilon.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.rmsprop(0.1, decay=0.5, eps=0.0)
        >>> round(float(tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))[0][0]), 6)
        -0.134164
    """
    return chain(
        scale_by_rmsprop(learning_rate, decay, momentum, eps, centered=centered),
        scale_by_learning_rate(DESCEND),
    )


class TorchRMSpropState(NamedTuple):
    """State of torch's RMSprop rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    square_avg: _protocol.Updates  # mean square (starts at 0)
    momentum_buffer: _protocol.Updates  # for momentum > 0 (starts at 0), else None
    grad_avg: _protocol.Updates  # mean gradient when centered (starts at 0), else None


def _torch_rmsprop_leaf(g, square_avg, buf, grad_avg, h):
    """`_single_tensor_rmsprop`: `g / (sqrt(square_avg [- grad_avg^2]) + eps)`, summed in the buffer."""
    square_avg = _formulas.moment_blend(square_avg, g * g, h.alpha)
    if grad_avg is not None:
        grad_avg = _formulas.moment_increment(grad_avg, g, h.alpha)
        avg = jnp.sqrt(square_avg - grad_avg * grad_avg) + h.eps
    else:
        avg = jnp.sqrt(square_avg) + h.eps
    step = g / avg
    if buf is None:
        return step, square_avg, None, grad_avg
    buf = buf * h.momentum + step
    return buf, square_avg, buf, grad_avg


def rmsprop_rule(
    alpha: float, eps: float, momentum: float, *, centered: bool
) -> _protocol.GradientTransformation:
    """torch's RMSprop direction (eps outside the root, the rate outside the momentum buffer)."""
    return update_rule(
        "torch_rmsprop", TorchRMSpropState, _torch_rmsprop_leaf,
        hyper={"alpha": alpha, "eps": eps, "momentum": momentum},
        slots={"square_avg": SQUARES, "momentum_buffer": 0.0 if momentum > 0 else None,
               "grad_avg": 0.0 if centered else None},
        real_only=_REAL_ONLY,
    )  # fmt: skip


__all__ = [
    "ScaleByRmspropState",
    "rmsprop",
    "scale_by_rmsprop",
]
