"""Adagrad: TF's (`scale_by_adagrad`, `adagrad`), contrib's `reg_adagrad`, optax's (`scale_by_rss`), torch's
rule."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp
from jax import lax

from gradtx._algorithms.adam import _REAL_ONLY, _dtype
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByAdagradState(NamedTuple):
    """State of `scale_by_adagrad`."""

    count: _protocol.Count  # int32: completed updates
    accumulator: _protocol.Updates  # TF slot "accumulator" (starts at initial_accumulator_value)


def _adagrad_leaf(g, accum, h):
    """ApplyAdagrad: `accum += g^2` (kept when `update_slots` is False), the step `g / sqrt(accum)`."""
    if isinstance(h.update_slots, bool):
        accum = accum + _formulas.abs_sq(g) if h.update_slots else accum
    else:  # a traced flag
        accum = jnp.where(h.update_slots, accum + _formulas.abs_sq(g), accum)
    return g * lax.rsqrt(accum), accum


@_registry.transform()
def scale_by_adagrad(initial_accumulator_value: float = 0.1) -> _protocol.GradientTransformation:
    r"""Divide by the root of the accumulated squared gradients, as TF's `ApplyAdagrad` kernel.

    .. math:: a_t = a_{t-1} + g_t^2, \qquad u_t = g_t \, a_t^{-1/2}

    Followed by `scale_by_learning_rate(lr)` this is `tf.compat.v1.train.AdagradOptimizer`
    (no epsilon: the accumulator starts positive instead). Row-sparse gradients change
    the touched rows only (`SparseApplyAdagrad`). The extra argument `update_slots=False`
    of `update` applies the step without accumulating (contrib's RegAdagrad
    `avoid_updating_slots()`, the kernel's `update_slots` attribute).

    Args:
      initial_accumulator_value: the starting value of the accumulator; must be > 0.

    Returns:
      A `GradientTransformation` with state `ScaleByAdagradState(count, accumulator)`.

    Raises:
      ValueError: if `initial_accumulator_value` is not positive.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adagrad(initial_accumulator_value=1.0)
        >>> u, state = tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))
        >>> float(u[0]), float(state.accumulator[0])
        (0.9486832618713379, 10.0)

    References:
      Duchi, Hazan, Singer, *Adaptive subgradient methods for online learning and
      stochastic optimization*, JMLR 2011.
    """
    _checks.check_number("scale_by_adagrad", "initial_accumulator_value", initial_accumulator_value)
    _checks.check_positive("scale_by_adagrad", "initial_accumulator_value", initial_accumulator_value)

    return update_rule(
        "scale_by_adagrad",
        ScaleByAdagradState,
        _adagrad_leaf,
        slots={"accumulator": Slot(initial_accumulator_value, nonnegative=True)},
        sparse="rows",  # SparseApplyAdagrad: the touched rows only
        tf_scalars=True,
        extra={"update_slots": True},  # the kernel's attribute (contrib's RegAdagrad)
    )


@_registry.optimizer("Adagrad")
def adagrad(
    learning_rate: _protocol.ScalarOrSchedule, initial_accumulator_value: float = 0.1
) -> _protocol.GradientTransformation:
    r"""Adagrad: TF's `AdagradOptimizer` (no epsilon), not `optax.adagrad`: that is `optax_compat.adagrad`.

    `accumulator += grad**2; var -= lr * grad / sqrt(accumulator)`, the accumulator
    starting at `initial_accumulator_value` (no epsilon). This is
    `chain(scale_by_adagrad(initial_accumulator_value), scale_by_learning_rate(learning_rate))`;
    row-sparse gradients change the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_accumulator_value: start of the accumulator; must be > 0 (as TF requires).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "accumulator")`.

    Raises:
      ValueError: if `initial_accumulator_value` is not positive or the rate is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adagrad(learning_rate=1.0, initial_accumulator_value=3.0)
        >>> tx.update(jnp.array([1.0]), tx.init(jnp.zeros(1)))[0]
        Array([-0.5], dtype=float32)
    """
    return chain(scale_by_adagrad(initial_accumulator_value), scale_by_learning_rate(learning_rate))


@_registry.optimizer("RegAdagrad")
def reg_adagrad(
    learning_rate: _protocol.ScalarOrSchedule, initial_accumulator_value: float = 0.1
) -> _protocol.GradientTransformation:
    r"""RegAdagrad: `tf.contrib.opt.RegAdagradOptimizer`: Adagrad whose slots can be left alone for a step.

    A step called as `update(..., update_slots=False)` applies Adagrad's rate without
    adding the gradient to the accumulator (TF's `with opt.avoid_updating_slots():`), e.g.
    for a regularization gradient. Otherwise it is `adagrad`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_accumulator_value: start of the accumulator; must be > 0.

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "accumulator")`.

    Raises:
      ValueError: if `initial_accumulator_value` is not positive or the rate is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.reg_adagrad(1.0, initial_accumulator_value=4.0)
        >>> u, state = tx.update(jnp.ones(1), tx.init(jnp.zeros(1)), update_slots=False)
        >>> u, gradtx.get_slot(state, "accumulator")
        (Array([-0.5], dtype=float32), Array([4.], dtype=float32))
    """
    return adagrad(learning_rate, initial_accumulator_value)


class ScaleByRssState(NamedTuple):
    """State of `scale_by_rss`."""

    count: _protocol.Count  # int32: completed updates
    sum_of_squares: _protocol.Updates  # the sum of squared gradients (starts at the initial value)


def _rss_leaf(g, sum_of_squares, h):
    sum_of_squares = _formulas.abs_sq(g) + sum_of_squares
    scaling = jnp.where(sum_of_squares > 0, lax.rsqrt(sum_of_squares + h.eps), 0.0)
    return scaling * g, sum_of_squares


@_registry.transform()
def scale_by_rss(
    initial_accumulator_value: Any = 0.1, eps: _protocol.ScalarOrSchedule = 1e-7
) -> _protocol.GradientTransformation:
    r"""Divide by the root of the sum of squared gradients (optax's Adagrad scaling).

    .. math::
        s_t = s_{t-1} + g_t^2, \qquad u_t = \frac{g_t}{\sqrt{s_t + \epsilon}} \ (0 \text{ where } s_t = 0)

    The numbers of `optax.scale_by_rss`; TF's Adagrad kernel is `scale_by_adagrad`. A
    row-sparse gradient is densified first.

    Args:
      initial_accumulator_value: the sum's initial value, >= 0.
      eps: added to the sum under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByRssState(count, sum_of_squares)`.

    Raises:
      ValueError: for a negative `initial_accumulator_value` or `eps`.
      TypeError: for an `initial_accumulator_value` that is a schedule.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_rss(initial_accumulator_value=0.0, eps=0.0)
        >>> tx.update(jnp.array([3.0, 0.0]), tx.init(jnp.zeros(2)))[0]  # 3 / sqrt(9); 0 stays 0
        Array([1., 0.], dtype=float32)

    References:
      Duchi, Hazan, Singer, *Adaptive subgradient methods for online learning and stochastic
      optimization*, JMLR 2011.
    """
    fn = "scale_by_rss"
    _checks.check_number(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "eps", eps)
    return update_rule(
        fn,
        ScaleByRssState,
        _rss_leaf,
        hyper={"eps": eps},
        slots={"sum_of_squares": Slot(initial_accumulator_value, nonnegative=True)},
    )


class TorchAdagradState(NamedTuple):
    """State of torch's Adagrad rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    sum: _protocol.Updates  # torch's "sum" of squared gradients (starts at initial_accumulator_value)


def _torch_adagrad_leaf(g, state_sum, h, *, decayed: bool):
    """`_single_tensor_adagrad`: `g / (sqrt(sum) + eps)`, divided by `1 + (t - 1) lr_decay`."""
    state_sum = state_sum + g * g
    u = g / (jnp.sqrt(state_sum) + h.eps)
    if decayed:
        u = u / (1 + jnp.asarray(h.count, _dtype(g)) * h.lr_decay)
    return u, state_sum


def adagrad_rule(
    lr_decay: float, initial_accumulator_value: float, eps: float
) -> _protocol.GradientTransformation:
    """torch's Adagrad direction (eps outside the root, the rate decayed by `1 + (t - 1) lr_decay`)."""
    return update_rule(
        "torch_adagrad", TorchAdagradState, functools.partial(_torch_adagrad_leaf, decayed=lr_decay != 0),
        hyper={"lr_decay": lr_decay, "eps": eps}, slots={"sum": Slot(initial_accumulator_value, None, True)},
        real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


__all__ = [
    "ScaleByAdagradState",
    "ScaleByRssState",
    "adagrad",
    "reg_adagrad",
    "scale_by_adagrad",
    "scale_by_rss",
]
