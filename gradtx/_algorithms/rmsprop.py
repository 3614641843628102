"""RMSProp: TF's (`scale_by_rmsprop`, `rmsprop`), optax's (`scale_by_rms`, `scale_by_stddev`,
`scale_by_bias_corrected_rms`) and torch's rule."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp
from jax import lax

from gradtx._algorithms.adam import _REAL_ONLY, _check_common, corrected_step
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
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


class ScaleByRmsState(NamedTuple):
    """State of `scale_by_rms`."""

    count: _protocol.Count  # int32: completed updates
    nu: _protocol.Updates  # second moment (starts at `initial_scale`)


class ScaleByRStdDevState(NamedTuple):
    """State of `scale_by_stddev`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # second moment (starts at `initial_scale`)


def _scaling(var, h, *, eps_in_sqrt: bool):
    """`1 / sqrt(var + eps)` (optax's default) or `1 / (sqrt(var) + eps)`."""
    return lax.rsqrt(var + h.eps) if eps_in_sqrt else 1 / (jnp.sqrt(var) + h.eps)


def _rms_leaf(g, nu, h, *, eps_in_sqrt: bool, bias_correction: bool):
    nu = _formulas.optax_moment(nu, _formulas.abs_sq(g), h.decay)
    return _scaling(nu / h.bc2 if bias_correction else nu, h, eps_in_sqrt=eps_in_sqrt) * g, nu


def _stddev_leaf(g, mu, nu, h, *, eps_in_sqrt: bool, bias_correction: bool):
    mu = _formulas.optax_moment(mu, g, h.decay)
    nu = _formulas.optax_moment(nu, _formulas.abs_sq(g), h.decay)
    mu_hat, nu_hat = (mu / h.bc2, nu / h.bc2) if bias_correction else (mu, nu)
    return _scaling(nu_hat - _formulas.abs_sq(mu_hat), h, eps_in_sqrt=eps_in_sqrt) * g, mu, nu


def _rms_rule(fn, state, leaf, slots, decay, eps, initial_scale, eps_in_sqrt, bias_correction):
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_number(fn, "initial_scale", initial_scale)
    _checks.check_nonnegative(fn, "initial_scale", initial_scale)
    _checks.check_bool(fn, "eps_in_sqrt", eps_in_sqrt)
    _checks.check_bool(fn, "bias_correction", bias_correction)
    return update_rule(
        fn,
        state,
        functools.partial(leaf, eps_in_sqrt=eps_in_sqrt, bias_correction=bias_correction),
        hyper={"decay": decay, "eps": eps},
        slots=slots,
        prepare=functools.partial(corrections, b1=None, b2="decay") if bias_correction else None,
    )


@_registry.transform()
def scale_by_rms(
    decay: _protocol.ScalarOrSchedule = 0.9,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    initial_scale: Any = 0.0,
    eps_in_sqrt: bool = True,
    bias_correction: bool = False,
) -> _protocol.GradientTransformation:
    r"""Divide by the root of a moving average of squared gradients (optax's RMSProp scaling).

    .. math::
        \nu_t = \rho \nu_{t-1} + (1-\rho) g_t^2, \qquad u_t = \frac{g_t}{\sqrt{\hat\nu_t + \epsilon}}

    with :math:`\hat\nu_t = \nu_t` (or :math:`\nu_t / (1-\rho^t)` with `bias_correction`);
    `eps_in_sqrt=False` divides by :math:`\sqrt{\hat\nu_t} + \epsilon` instead. The numbers of
    `optax.scale_by_rms`; TF's RMSProp (`rms` starting at ones, the rate in the kernel) is
    `scale_by_rmsprop`. A row-sparse gradient is densified first.

    Args:
      decay: :math:`\rho`, the decay of the second moment, in [0, 1].
      eps: added to the mean square (or to its root), >= 0.
      initial_scale: the second moment's initial value, >= 0.
      eps_in_sqrt: add `eps` under the root (optax's default) or to it.
      bias_correction: divide the second moment by :math:`1-\rho^t`.

    Returns:
      An `ElementWise` transform with state `ScaleByRmsState(count, nu)`.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative `eps` / `initial_scale`.
      TypeError: for a non-bool `eps_in_sqrt` or `bias_correction`, or a schedule as `initial_scale`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_rms(decay=0.75, eps=0.0)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]  # 2 / sqrt(0.25 * 4)
        Array([2.], dtype=float32)

    References:
      Tieleman, Hinton, *Lecture 6.5 - RMSProp*, COURSERA: Neural Networks for Machine
      Learning, 2012.
    """
    return _rms_rule(
        "scale_by_rms",
        ScaleByRmsState,
        _rms_leaf,
        {"nu": initial_scale},
        decay,
        eps,
        initial_scale,
        eps_in_sqrt,
        bias_correction,
    )


@_registry.transform()
def scale_by_stddev(
    decay: _protocol.ScalarOrSchedule = 0.9,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    initial_scale: Any = 0.0,
    eps_in_sqrt: bool = True,
    bias_correction: bool = False,
) -> _protocol.GradientTransformation:
    r"""Divide by the root of a moving variance of the gradients (optax's centered RMSProp scaling).

    .. math::
        \mu_t = \rho \mu_{t-1} + (1-\rho) g_t, \quad \nu_t = \rho \nu_{t-1} + (1-\rho) g_t^2, \quad
        u_t = \frac{g_t}{\sqrt{\hat\nu_t - \hat\mu_t^2 + \epsilon}}

    with the same options as `scale_by_rms` (bias correction divides both moments by
    :math:`1-\rho^t`). The numbers of `optax.scale_by_stddev`. A row-sparse gradient is
    densified first.

    Args:
      decay: :math:`\rho`, the decay of both moments, in [0, 1].
      eps: added to the variance (or to its root), >= 0.
      initial_scale: the second moment's initial value, >= 0.
      eps_in_sqrt: add `eps` under the root (optax's default) or to it.
      bias_correction: divide both moments by :math:`1-\rho^t`.

    Returns:
      An `ElementWise` transform with state `ScaleByRStdDevState(count, mu, nu)`.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative `eps` / `initial_scale`.
      TypeError: for a non-bool `eps_in_sqrt` or `bias_correction`, or a schedule as `initial_scale`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_stddev(decay=0.5, eps=0.0)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]  # 2 / sqrt(2 - 1)
        Array([2.], dtype=float32)

    References:
      Graves, *Generating sequences with recurrent neural networks*, 2013 (eq. 38-45).
    """
    return _rms_rule(
        "scale_by_stddev",
        ScaleByRStdDevState,
        _stddev_leaf,
        {"mu": 0.0, "nu": initial_scale},
        decay,
        eps,
        initial_scale,
        eps_in_sqrt,
        bias_correction,
    )


class ScaleByBiasCorrectedRmsState(NamedTuple):
    """State of `scale_by_bias_corrected_rms`."""

    count: _protocol.Count  # int32: completed updates
    nu: _protocol.Updates  # second moment (starts at 0)


def _bias_corrected_rms_leaf(g, v, h):
    v = _formulas.optax_moment(v, _formulas.abs_sq(g), h.decay)
    return corrected_step(g, v, h), v


@_registry.transform()
def scale_by_bias_corrected_rms(
    decay: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Divide by the root of the bias-corrected second moment: Adam without a first moment.

    .. math::
        v_t = \beta v_{t-1} + (1-\beta) g_t^2, \qquad
        u_t = \frac{g_t}{\sqrt{v_t / (1-\beta^t) + \epsilon_{root}} + \epsilon}

    `scale_by_bias_corrected_adam` with :math:`\beta_1 = 0`, without storing the unused
    first moment (`optax.scale_by_rms(eps_in_sqrt=False, bias_correction=True)`): the base
    step of schedule-free AdamW. A row-sparse gradient is densified first.

    Args:
      decay: :math:`\beta`, the decay of the second moment, in [0, 1).
      eps: added to the root, >= 0.
      eps_root: added under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedRmsState(count, nu)`.

    Raises:
      ValueError: if `decay` is outside [0, 1) or `eps` / `eps_root` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_rms(eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 1,
      :math:`\beta_1 = 0`); Defazio et al., *The road less scheduled*, NeurIPS 2024 (Algorithm 1).
    """
    fn = "scale_by_bias_corrected_rms"
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0, high_open=True)
    _check_common(fn, eps, eps_root)

    return update_rule(
        fn,
        ScaleByBiasCorrectedRmsState,
        _bias_corrected_rms_leaf,
        hyper={"decay": decay, "eps": eps, "eps_root": eps_root},
        slots={"nu": SQUARES},
        prepare=functools.partial(corrections, b1=None, b2="decay"),
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
    "ScaleByBiasCorrectedRmsState",
    "ScaleByRStdDevState",
    "ScaleByRmsState",
    "ScaleByRmspropState",
    "rmsprop",
    "scale_by_bias_corrected_rms",
    "scale_by_rms",
    "scale_by_rmsprop",
    "scale_by_stddev",
]
