"""AdaBelief (optax's numbers): `scale_by_belief`, `adabelief`."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import first_moment_estimate
from gradtx._algorithms.radam import _check_betas_and_eps
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByBeliefState(NamedTuple):
    """State of `scale_by_belief`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # the moving average of (g - m)^2, plus eps_root per step (starts at 0)


def _belief_leaf(g, m, s, h, *, nesterov: bool):
    m = _formulas.optax_moment(m, g, h.b1)
    s = _formulas.optax_moment(s, _formulas.abs_sq(g - m), h.b2) + h.eps_root  # eps_root is kept in s
    return first_moment_estimate(m, g, h.b1, h, nesterov) / (jnp.sqrt(s / h.bc2) + h.eps), m, s


@_registry.transform()
def scale_by_belief(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    eps_root: _protocol.ScalarOrSchedule = 1e-16,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""AdaBelief's scaling: Adam whose second moment tracks the gradient's deviation from its momentum.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        s_t = \beta_2 s_{t-1} + (1-\beta_2)(g_t - m_t)^2 + \epsilon_{root}, \\
        u_t = \frac{m_t / (1-\beta_1^t)}{\sqrt{s_t / (1-\beta_2^t)} + \epsilon}

    A gradient close to what the momentum predicts (a small "surprise") gets a large
    step, one far from it a small step. :math:`\epsilon_{root}` is added to the state at
    every step, as in the paper. With `nesterov`, the corrected first moment is Nesterov's
    (as in `scale_by_bias_corrected_adam`). These are the numbers of `optax.scale_by_belief`
    (and its defaults; the paper's are `eps=1e-8`, `eps_root=0`). A row-sparse gradient is
    densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` transform with state `ScaleByBeliefState(count, mu, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.
      TypeError: for a non-bool `nesterov`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_belief()
        >>> u, state = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> u.round(4)  # m = 0.1 g, s = 0.001 (0.9 g)^2: 0.1 g / (0.9 |g| 0.1) = sign(g) / 0.9
        Array([ 1.1111, -1.1111], dtype=float32)

    References:
      Zhuang et al., *AdaBelief optimizer: adapting stepsizes by the belief in observed
      gradients*, NeurIPS 2020 (Algorithm 2).
    """
    fn = "scale_by_belief"
    _check_betas_and_eps(fn, b1, b2, eps, eps_root)
    _checks.check_bool(fn, "nesterov", nesterov)

    return update_rule(
        fn,
        ScaleByBeliefState,
        functools.partial(_belief_leaf, nesterov=nesterov),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"mu": 0.0, "nu": SQUARES},
        prepare=functools.partial(corrections, nesterov=nesterov),
    )


@_registry.optimizer("AdaBelief")
def adabelief(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    eps_root: _protocol.ScalarOrSchedule = 1e-16,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""AdaBelief: Adam with steps set by how far each gradient is from its momentum's prediction.

    `chain(scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.adabelief`
    (the paper's epsilons are `eps=1e-8`, `eps_root=0`). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` chain; its slots are `m` and `s`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adabelief(0.09)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # -lr sign(g) / 0.9
        [-0.1, 0.1]

    References:
      Zhuang et al., *AdaBelief optimizer: adapting stepsizes by the belief in observed
      gradients*, NeurIPS 2020.
    """
    return chain(
        scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov), scale_by_learning_rate(learning_rate)
    )


__all__ = ["ScaleByBeliefState", "adabelief", "scale_by_belief"]
