"""Adagrad dual averaging (TF's `AdagradDAOptimizer`): `scale_by_adagrad_da`, `adagrad_da`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import DESCEND, scale_by_learning_rate


class ScaleByAdagradDAState(NamedTuple):
    """State of `scale_by_adagrad_da`."""

    count: _protocol.Count  # int32: completed updates (the closed form uses t = count + 1)
    gradient_accumulator: _protocol.Updates  # TF slot "gradient_accumulator" (starts at 0)
    gradient_squared_accumulator: _protocol.Updates  # TF slot (starts at the initial value)


def _adagrad_da_step(h, state, extra_args):
    """TF's `static_cast<float>(global_step + 1)`: the step t as a scalar of the variables' dtype."""
    del state, extra_args
    return {"step": jnp.asarray(h.t).astype(h.learning_rate.dtype)}


def _adagrad_da_leaf(g, g_acc, gg_acc, var, h):
    """ApplyAdagradDA's closed form at step t: the new weights, returned as the step `var - var_new`."""
    g_acc = g_acc + g
    gg_acc = gg_acc + _formulas.abs_sq(g)
    denom = h.l2 * (h.step * h.learning_rate) + jnp.sqrt(gg_acc)
    shrunk = h.learning_rate * -1.0 * _formulas.soft_threshold(g_acc, h.step * h.l1) / denom
    plain = h.learning_rate * g_acc * -1.0 / denom
    new_var = _formulas.by_l1(h.l1, shrunk, plain)
    return var - new_var, g_acc, gg_acc


@_registry.transform()
def scale_by_adagrad_da(
    learning_rate: _protocol.ScalarOrSchedule,
    initial_gradient_squared_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Adagrad dual averaging, TF's `ApplyAdagradDA` closed form; returns the descent step `var - var_new`.

    With accumulated gradients :math:`G_t`, squared gradients :math:`S_t` and
    :math:`t` (TF's `global_step + 1`, read before its increment):

    .. math::
        w_t = \frac{-\eta\,\mathrm{sign}(G_t)\,\max(|G_t| - t\,\ell_1, 0)}{\ell_2\,t\eta + \sqrt{S_t}}

    The new weights ignore the previous ones; this block outputs `w_{t-1} - w_t`, so it
    is followed by `scale_by_learning_rate(1.0)` (the rate is already inside). Row-sparse
    gradients change the touched rows only, with the same t.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_gradient_squared_accumulator_value: start of the squared accumulator; > 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 regularization strength, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByAdagradDAState`.

    Raises:
      ValueError: for a non-positive initial value or negative strengths; at update time,
        if `params` is not passed.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adagrad_da(1.0, initial_gradient_squared_accumulator_value=3.0)
        >>> params = jnp.array([0.5])
        >>> u, _ = tx.update(jnp.array([1.0]), tx.init(params), params)
        >>> float(params[0] - u[0])  # the new weight: -1 * 1 / sqrt(3 + 1)
        -0.5

    References:
      Duchi, Hazan, Singer, JMLR 2011 (dual averaging); Xiao, *Dual averaging methods for
      regularized stochastic learning and online optimization*, JMLR 2010.
    """
    fn = "scale_by_adagrad_da"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_number(
        fn, "initial_gradient_squared_accumulator_value", initial_gradient_squared_accumulator_value
    )
    _checks.check_positive(
        fn, "initial_gradient_squared_accumulator_value", initial_gradient_squared_accumulator_value
    )
    _checks.check_nonnegative(fn, "l1", l1)
    _checks.check_nonnegative(fn, "l2", l2)

    return update_rule(
        fn,
        ScaleByAdagradDAState,
        _adagrad_da_leaf,
        hyper={"learning_rate": learning_rate, "l1": l1, "l2": l2},
        slots={
            "gradient_accumulator": 0.0,
            "gradient_squared_accumulator": Slot(initial_gradient_squared_accumulator_value),
        },
        prepare=_adagrad_da_step,
        sparse="rows",  # SparseApplyAdagradDA: the touched rows only, with the same t
        reads_params=True,
        tf_scalars=True,
    )


@_registry.optimizer("AdagradDA")
def adagrad_da(
    learning_rate: _protocol.ScalarOrSchedule,
    initial_gradient_squared_accumulator_value: float = 0.1,
    l1: _protocol.ScalarOrSchedule = 0.0,
    l2: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Adagrad dual averaging: `tf.compat.v1.train.AdagradDAOptimizer` (`ApplyAdagradDA`).

    The closed form uses TF's step `T = global_step + 1` read before its increment, which
    is `count + 1` here; TF's `global_step` argument is therefore not needed. This is
    `chain(scale_by_adagrad_da(...), scale_by_learning_rate(1.0))`; row-sparse gradients
    change the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_gradient_squared_accumulator_value: start of the squared accumulator; > 0.
      l1: L1 regularization strength, >= 0.
      l2: L2 regularization strength, >= 0.

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are
      `gradient_accumulator` and `gradient_squared_accumulator`.

    Raises:
      ValueError: for a non-positive initial value or a negative rate or strength.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adagrad_da(1.0, initial_gradient_squared_accumulator_value=3.0)
        >>> params = jnp.array([0.5])
        >>> gradtx.apply_updates(params, tx.update(jnp.array([1.0]), tx.init(params), params)[0])
        Array([-0.5], dtype=float32)
    """
    return chain(
        scale_by_adagrad_da(learning_rate, initial_gradient_squared_accumulator_value, l1, l2),
        scale_by_learning_rate(DESCEND),
    )


__all__ = ["ScaleByAdagradDAState", "adagrad_da", "scale_by_adagrad_da"]
