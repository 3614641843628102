"""FTRL-Proximal (TF's `ApplyFtrlV2`): `scale_by_ftrl`, `ftrl`."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import DESCEND, scale_by_learning_rate


class ScaleByFtrlState(NamedTuple):
    """State of `scale_by_ftrl`."""

    count: _protocol.Count  # int32: completed updates
    accum: (
        _protocol.Updates
    )  # TF slot "accum": sum of squared gradients (starts at initial_accumulator_value)
    linear: _protocol.Updates  # TF slot "linear" (starts at 0)


def _power(x: jax.Array, p: jax.Array, p_is_half: bool | None) -> jax.Array:
    """`x ** -p` with TF's special case: `sqrt(x)` when `p == -0.5` (None: decide at run time)."""
    if p_is_half is None:
        return jnp.where(p == -0.5, jnp.sqrt(x), jnp.power(x, -p))
    return jnp.sqrt(x) if p_is_half else jnp.power(x, -p)


def _adjusted_l2(h, state, extra_args):
    """TF's `_prepare`: `l2 + beta / (2 max(lr, 1e-36))`, once per step in the variables' dtype."""
    del state, extra_args
    return {"l2_adjusted": h.l2 + h.beta / (2.0 * jnp.maximum(h.learning_rate, 1e-36))}


def _ftrl_leaf(g, accum, linear, var, h, *, p_is_half: bool | None):
    """ApplyFtrlV2: the new `linear` and `accum`, and the closed-form weights as the step `var - var_new`."""
    lr, p = h.learning_rate, h.learning_rate_power
    g_shrunk = g + 2 * h.l2_shrinkage * var
    new_accum = accum + _formulas.abs_sq(g)
    sigma = (_power(new_accum, p, p_is_half) - _power(accum, p, p_is_half)) / lr
    linear = linear + (g_shrunk - sigma * var)
    x = h.l1 * jnp.sign(linear) - linear
    y = _power(new_accum, p, p_is_half) / lr + 2 * h.l2_adjusted
    new_var = jnp.where(jnp.abs(linear) > h.l1, x / y, jnp.zeros_like(var))
    return var - new_var, new_accum, linear


@_registry.transform()
def scale_by_ftrl(
    learning_rate: _protocol.ScalarOrSchedule,
    learning_rate_power: _protocol.ScalarOrSchedule = -0.5,
    initial_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
    l2_shrinkage: _protocol.ScalarOrSchedule = 0.0,
    beta: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""FTRL-proximal, exactly TF's `ApplyFtrlV2` (`ApplyFtrl` if `l2_shrinkage = 0`); gives `var - var_new`.

    With :math:`p` = `learning_rate_power`, :math:`\tilde g = g + 2\lambda_s w`
    (shrinkage), :math:`n' = n + g^2`:

    .. math::
        z \mathrel{+}= \tilde g - \frac{n'^{-p} - n^{-p}}{\eta}\, w, \qquad
        w' = \begin{cases}
          \dfrac{\ell_1\,\mathrm{sign}(z) - z}{n'^{-p}/\eta + 2\ell_2'} & |z| > \ell_1 \\ 0 & \text{else}
        \end{cases}

    where :math:`\ell_2' = \ell_2 + \beta / (2\max(\eta, 10^{-36}))` (TF's `beta`). With
    :math:`p = -1/2` the powers are square roots (TF's special case); with :math:`p = 0`
    the learning rate is fixed. The new weights depend on the old ones only through the
    :math:`z` update, so the first step jumps to the closed form. The rate is inside, so
    an alias follows this block with `scale_by_learning_rate(1.0)`. Row-sparse gradients
    change the touched rows only (`SparseApplyFtrl[V2]`). A NaN gradient leaves `accum` and
    `linear` (:math:`z`) NaN for good: :math:`|z| > \ell_1` is then false and the weight
    stays 0, as in TF's kernel. +-inf does the same where it has the weight's sign and
    makes the weight NaN where not; wrap in `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule), > 0.
      learning_rate_power: :math:`p \le 0`; -0.5 is the usual FTRL schedule.
      initial_accumulator_value: start of `accum`, >= 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 (stabilization) regularization strength, >= 0.
      l2_shrinkage: L2 shrinkage (magnitude penalty, FtrlV2), >= 0.
      beta: the paper's beta, folded into `l2` as above, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByFtrlState(count, accum, linear)`.

    Raises:
      ValueError: mirroring TF: a rate <= 0 (also a schedule's rate at step 0; a schedule
        must stay > 0), `initial_accumulator_value` < 0, `learning_rate_power` > 0, a
        negative strength; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_ftrl(learning_rate=1.0, initial_accumulator_value=0.0, l1=0.5)
        >>> params = jnp.array([0.0, 0.0])
        >>> u, state = tx.update(jnp.array([2.0, 0.25]), tx.init(params), params)
        >>> params - u  # z = g; |z| > l1: (0.5 - 2) / sqrt(4) ; else 0
        Array([-0.75,  0.  ], dtype=float32)

    References:
      McMahan et al., *Ad click prediction: a view from the trenches*, KDD 2013.
    """
    fn = "scale_by_ftrl"
    _checks.check_hyperparam(fn, "learning_rate", learning_rate)
    _checks.check_positive(fn, "learning_rate", learning_rate)  # TF's kernel: "lr is not a positive scalar"
    if _checks.is_schedule(learning_rate):  # FTRL divides by the rate: a warm-up from 0 is NaN for good
        first = _checks.schedule_at_zero(learning_rate)
        if first is not None and not first > 0:
            raise ValueError(
                f"`{_checks.api_name(fn)}`: the schedule given as `learning_rate` must stay > 0 (FTRL "
                f"divides by the rate, as TF's kernel refuses), got {first!r} at step 0."
            )
    _checks.check_nonpositive(fn, "learning_rate_power", learning_rate_power)
    _checks.check_number(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "initial_accumulator_value", initial_accumulator_value)
    for name, value in (("l1", l1), ("l2", l2), ("l2_shrinkage", l2_shrinkage), ("beta", beta)):
        _checks.check_nonnegative(fn, name, value)
    p_static = (
        None
        if _hyper.any_schedule(learning_rate_power) or isinstance(learning_rate_power, jax.core.Tracer)
        else float(learning_rate_power) == -0.5  # type: ignore[arg-type]
    )

    return update_rule(
        fn,
        ScaleByFtrlState,
        functools.partial(_ftrl_leaf, p_is_half=p_static),
        hyper={
            "learning_rate": learning_rate,
            "learning_rate_power": learning_rate_power,
            "l1": l1,
            "l2": l2,
            "l2_shrinkage": l2_shrinkage,
            "beta": beta,
        },
        slots={"accum": Slot(initial_accumulator_value, nonnegative=True), "linear": 0.0},
        prepare=_adjusted_l2,
        sparse="rows",  # SparseApplyFtrl[V2]: the touched rows only
        reads_params=True,
        tf_scalars=True,
    )


@_registry.optimizer("Ftrl")
def ftrl(
    learning_rate: _protocol.ScalarOrSchedule,
    learning_rate_power: _protocol.ScalarOrSchedule = -0.5,
    initial_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
    l2_shrinkage: _protocol.ScalarOrSchedule = 0.0,
    beta: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""FTRL-proximal: `tf.compat.v1.train.FtrlOptimizer` (`ApplyFtrl`, `ApplyFtrlV2` with shrinkage).

    This is `chain(scale_by_ftrl(...), scale_by_learning_rate(1.0))`: the rate is inside
    the closed form. Row-sparse gradients change the touched rows only, which is how FTRL
    trains huge sparse linear models. A NaN gradient leaves `accum` and `linear` NaN for
    good and pins the param to 0 (as TF does), +-inf does that where it has the param's
    sign and makes the param NaN where not; wrap in `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      learning_rate_power: <= 0; -0.5 is the usual schedule, 0 a fixed rate.
      initial_accumulator_value: start of the `accum` slot, >= 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 (stabilization) regularization strength, >= 0.
      l2_shrinkage: L2 shrinkage (magnitude) strength, >= 0; > 0 selects FtrlV2.
      beta: the paper's beta, >= 0 (added to l2 as `beta / (2 * lr)`).

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `accum`
      and `linear`.

    Raises:
      ValueError: as TF: `initial_accumulator_value` < 0, `learning_rate_power` > 0, a
        negative strength.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.ftrl(1.0, initial_accumulator_value=0.0, l1=0.5)
        >>> params = jnp.zeros(2)
        >>> gradtx.apply_updates(params, tx.update(jnp.array([2.0, 0.25]), tx.init(params), params)[0])
        Array([-0.75,  0.  ], dtype=float32)
    """
    return chain(
        scale_by_ftrl(
            learning_rate, learning_rate_power, initial_accumulator_value, l1, l2, l2_shrinkage, beta
        ),
        scale_by_learning_rate(DESCEND),
    )


__all__ = ["ScaleByFtrlState", "ftrl", "scale_by_ftrl"]
