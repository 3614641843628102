"""Yogi (optax's numbers): `scale_by_yogi`, `yogi`."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import corrected_step
from gradtx._algorithms.radam import _check_betas_and_eps
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByYogiState(NamedTuple):
    """State of `scale_by_yogi`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at initial_accumulator_value)
    nu: _protocol.Updates  # second moment, moved additively (starts at initial_accumulator_value)


def _yogi_leaf(g, m, v, h):
    m = _formulas.optax_moment(m, g, h.b1)
    g2 = _formulas.abs_sq(g)
    v = v - (1 - h.b2) * jnp.sign(v - g2) * g2
    return corrected_step(m / h.bc1, v, h), m, v


@_registry.transform()
def scale_by_yogi(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-3,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    initial_accumulator_value: float = 1e-6,
) -> _protocol.GradientTransformation:
    r"""Yogi's scaling: Adam whose second moment moves additively, by at most :math:`(1-\beta_2) g^2` a step.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        v_t = v_{t-1} - (1-\beta_2)\,\operatorname{sign}(v_{t-1} - g_t^2)\, g_t^2, \\
        u_t = \frac{m_t / (1-\beta_1^t)}{\sqrt{v_t / (1-\beta_2^t) + \epsilon_{root}} + \epsilon}

    Adam's :math:`nu` forgets a large past gradient multiplicatively; Yogi's shrinks it by
    an amount set by the current gradient, so the effective rate grows slowly after a burst
    of large gradients. Both moments start at `initial_accumulator_value`. These are the
    numbers and defaults of `optax.scale_by_yogi` (the paper's Algorithm 2 has no bias
    correction). A row-sparse gradient is densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: the second moment's rate, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      initial_accumulator_value: the initial value of both moments, >= 0 (a number: it is used once).

    Returns:
      An `ElementWise` transform with state `ScaleByYogiState(count, mu, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1), or `eps`, `eps_root` or `initial_accumulator_value`
        is negative.
      TypeError: for a schedule as `initial_accumulator_value`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_yogi(eps=0.0, initial_accumulator_value=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # v_1 = (1-b2) g^2: sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Zaheer, Reddi, Sachan, Kale, Kumar, *Adaptive methods for nonconvex optimization*,
      NeurIPS 2018 (Algorithm 2).
    """
    fn = "scale_by_yogi"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_number(fn, "initial_accumulator_value", initial_accumulator_value)
    _checks.check_nonnegative(fn, "initial_accumulator_value", initial_accumulator_value)

    return update_rule(
        fn,
        ScaleByYogiState,
        _yogi_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"mu": initial_accumulator_value, "nu": initial_accumulator_value},
        prepare=corrections,
    )


@_registry.optimizer("Yogi")
def yogi(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-3,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    initial_accumulator_value: float = 1e-6,
) -> _protocol.GradientTransformation:
    r"""Yogi: Adam whose second moment moves additively, so a burst of large gradients fades slowly.

    `chain(scale_by_yogi(b1, b2, eps, eps_root, initial_accumulator_value),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.yogi`. A
    row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: the second moment's rate, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      initial_accumulator_value: the initial value of both moments, >= 0.

    Returns:
      An `ElementWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, initial value or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.yogi(0.1, eps=0.0, initial_accumulator_value=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # -lr sign(g)
        [-0.1, 0.1]

    References:
      Zaheer, Reddi, Sachan, Kale, Kumar, *Adaptive methods for nonconvex optimization*,
      NeurIPS 2018.
    """
    return chain(
        scale_by_yogi(b1, b2, eps, eps_root, initial_accumulator_value), scale_by_learning_rate(learning_rate)
    )


__all__ = ["ScaleByYogiState", "scale_by_yogi", "yogi"]
