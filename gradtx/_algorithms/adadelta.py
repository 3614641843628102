"""Adadelta: TF's kernel (`scale_by_adadelta`, `adadelta`) and torch's rule."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.restated import restated
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByAdadeltaState(NamedTuple):
    """State of `scale_by_adadelta`."""

    count: _protocol.Count  # int32: completed updates
    accum: _protocol.Updates  # TF slot "accum": average of squared gradients (starts at 0)
    accum_update: _protocol.Updates  # TF slot "accum_update": average of squared updates (starts at 0)


def _adadelta_leaf(g, accum, accum_update, h):
    """ApplyAdadelta: the step `sqrt(U + eps) / sqrt(A + eps) * g` between the two moving averages."""
    accum = _formulas.moment_blend(accum, _formulas.abs_sq(g), h.rho)
    update = jnp.sqrt(accum_update + h.eps) * lax.rsqrt(accum + h.eps) * g
    return update, accum, _formulas.moment_blend(accum_update, _formulas.abs_sq(update), h.rho)


@_registry.transform()
def scale_by_adadelta(
    rho: _protocol.ScalarOrSchedule = 0.95, eps: _protocol.ScalarOrSchedule = 1e-8
) -> _protocol.GradientTransformation:
    r"""Adadelta's scaling as TF computes it, TF's defaults: not `optax.scale_by_adadelta` (`optax_compat`'s).

    .. math::
        A_t = \rho A_{t-1} + (1-\rho) g_t^2, \quad
        u_t = \sqrt{U_{t-1} + \epsilon}\,(A_t + \epsilon)^{-1/2}\, g_t, \quad
        U_t = \rho U_{t-1} + (1-\rho) u_t^2

    Followed by `scale_by_learning_rate(lr)` this is `tf.compat.v1.train.AdadeltaOptimizer`
    (`var -= lr * u`; use lr = 1.0 for the paper's form). Row-sparse gradients change the
    touched rows only (`SparseApplyAdadelta`).

    Args:
      rho: the decay rate, in [0, 1].
      eps: the constant added inside both square roots, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByAdadeltaState(count, accum, accum_update)`.

    Raises:
      ValueError: if `rho` is outside [0, 1] or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adadelta(rho=0.0, eps=1.0)
        >>> u, _ = tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))
        >>> float(u[0])  # sqrt(0 + 1) / sqrt(9 + 1) * 3
        0.9486832618713379

    References:
      Zeiler, *ADADELTA: an adaptive learning rate method*, arXiv:1212.5701, 2012.
    """
    fn = "scale_by_adadelta"
    _checks.check_in_range(fn, "rho", rho, 0.0, 1.0)
    _checks.check_nonnegative(fn, "eps", eps)

    return update_rule(
        fn,
        ScaleByAdadeltaState,
        _adadelta_leaf,
        hyper={"rho": rho, "eps": eps},
        slots={"accum": SQUARES, "accum_update": SQUARES},
        sparse="rows",  # SparseApplyAdadelta: the touched rows only
        tf_scalars=True,
    )


@_registry.optimizer("Adadelta")
def adadelta(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    rho: _protocol.ScalarOrSchedule = 0.95,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""Adadelta: TF's `AdadeltaOptimizer` and defaults, not `optax.adadelta`'s (`optax_compat.adadelta`).

    This is `chain(scale_by_adadelta(rho, eps), scale_by_learning_rate(learning_rate))`;
    use `learning_rate=1.0` for the paper's form. Row-sparse gradients change the touched
    rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      rho: the decay rate, in [0, 1].
      eps: the constant inside both square roots, >= 0.

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `accum`
      and `accum_update`.

    Raises:
      ValueError: for `rho` outside [0, 1], a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adadelta(learning_rate=1.0, rho=0.0, eps=1.0)
        >>> round(float(tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))[0][0]), 6)
        -0.948683
    """
    return chain(scale_by_adadelta(rho, eps), scale_by_learning_rate(learning_rate))


class TorchAdadeltaState(NamedTuple):
    """State of torch's Adadelta (`scale_by_adadelta` under torch's names)."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    square_avg: _protocol.Updates  # mean squared gradient (starts at 0)
    acc_delta: _protocol.Updates  # mean squared step (starts at 0)


def adadelta_rule(rho: float, eps: float) -> _protocol.GradientTransformation:
    """torch's Adadelta direction: `scale_by_adadelta` (TF's formula) as torch names it."""
    return restated(
        scale_by_adadelta(rho, eps), TorchAdadeltaState, {"accum": "square_avg", "accum_update": "acc_delta"}
    )


__all__ = ["ScaleByAdadeltaState", "adadelta", "scale_by_adadelta"]
