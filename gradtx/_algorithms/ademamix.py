"""AdEMAMix and its simplified form (optax's numbers)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.rule import SQUARES, Slot, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByAdemamixState(NamedTuple):
    """State of `scale_by_ademamix`."""

    count: _protocol.Count  # int32: completed updates
    m1: _protocol.Updates  # the fast moving average of the gradients (starts at 0)
    m2: _protocol.Updates  # the slow moving average of the gradients (starts at 0)
    nu: _protocol.Updates  # second moment (starts at 0)


class ScaleBySimplifiedAdemamixState(NamedTuple):
    """State of `scale_by_simplified_ademamix`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # the undamped momentum, sum of b1^k g_{t-k} (starts at 0)
    n: _protocol.Updates  # second moment (starts at 0)


def _check_eps(fn: str, eps: Any, eps_root: Any) -> None:
    for name, value in (("eps", eps), ("eps_root", eps_root)):
        _checks.check_finite(fn, name, value)
        _checks.check_nonnegative(fn, name, value)


def _ademamix_leaf(g, m1, m2, nu, h):
    m1 = _formulas.optax_moment(m1, g, h.b1)
    m2 = _formulas.optax_moment(m2, g, h.b3)
    nu = _formulas.optax_moment(nu, _formulas.abs_sq(g), h.b2)
    denominator = jnp.sqrt(nu / h.bc2 + h.eps_root) + h.eps
    return (m1 / h.bc1 + h.alpha * m2) / denominator, m1, m2, nu


def _simplified_ademamix_leaf(g, m, n, h):
    m = g + h.b1 * m
    g2 = _formulas.abs_sq(g)
    n = g2 + h.b2 * (n - g2)  # optax's lerp: the moment of Adam, rounded as optax rounds it
    return (m + h.alpha * g) / (jnp.sqrt(n / h.bc2 + h.eps_root) + h.eps), m, n


@_registry.transform()
def scale_by_ademamix(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule = 0.9999,
    alpha: _protocol.ScalarOrSchedule = 6.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    *,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdEMAMix's scaling: Adam's corrected fast momentum plus `alpha` times a slow, uncorrected momentum.

    .. math::
        m_1 \leftarrow \beta_1 m_1 + (1-\beta_1) g, \quad
        m_2 \leftarrow \beta_3 m_2 + (1-\beta_3) g, \quad
        \nu \leftarrow \beta_2 \nu + (1-\beta_2) g^2, \\
        u_t = \frac{m_1 / (1-\beta_1^t) + \alpha\, m_2}
                   {\sqrt{\nu / (1-\beta_2^t) + \epsilon_{root}} + \epsilon}

    The slow momentum remembers gradients over about :math:`1/(1-\beta_3)` steps (10,000
    with the default), so it is suited to long runs; the paper warms up `b3` and `alpha`
    with schedules. These are the numbers of `optax.contrib.scale_by_ademamix`, its
    default `alpha=6` included (`optax.contrib.ademamix` defaults to 5); like optax's, all
    three moments are kept in `mu_dtype`. A row-sparse gradient is densified first.

    Args:
      b1: decay of the fast first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: decay of the slow first moment, in [0, 1).
      alpha: the weight of the slow moment, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      mu_dtype: dtype of `m1`, `m2` and `nu` (default: each param's dtype).

    Returns:
      An `ElementWise` transform with state `ScaleByAdemamixState(count, m1, m2, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1), or `alpha`, `eps` or `eps_root` is negative.
      TypeError: for a `mu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_ademamix(alpha=0.0, eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # alpha 0: Adam, sign(g)
        Array([ 1., -1.], dtype=float32)

    References:
      Pagliardini, Ablin, Grangier, *The AdEMAMix optimizer: better, faster, older*, ICLR 2025
      (arXiv:2409.03137), Algorithm 1.
    """
    fn = "scale_by_ademamix"
    for name, value in (("b1", b1), ("b2", b2), ("b3", b3)):
        _checks.check_in_range(fn, name, value, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "alpha", alpha)
    _check_eps(fn, eps, eps_root)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)

    moment = Slot(0.0, mu_dtype)
    return update_rule(
        fn,
        ScaleByAdemamixState,
        _ademamix_leaf,
        hyper={"b1": b1, "b2": b2, "b3": b3, "alpha": alpha, "eps": eps, "eps_root": eps_root},
        slots={"m1": moment, "m2": moment, "nu": Slot(0.0, mu_dtype, nonnegative=True)},
        prepare=corrections,
    )


@_registry.transform()
def scale_by_simplified_ademamix(
    b1: _protocol.ScalarOrSchedule = 0.99,
    b2: _protocol.ScalarOrSchedule = 0.95,
    alpha: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Simplified AdEMAMix's scaling: an undamped momentum plus `alpha` times the gradient, over Adam's root.

    .. math::
        m \leftarrow \beta_1 m + g, \quad \nu \leftarrow \beta_2 \nu + (1-\beta_2) g^2, \qquad
        u_t = \frac{m + \alpha\, g}{\sqrt{\nu / (1-\beta_2^t) + \epsilon_{root}} + \epsilon}

    One momentum instead of AdEMAMix's two, not damped by :math:`1-\beta_1`: its size is
    about :math:`1/(1-\beta_1)` times the gradient's, so the learning rate is smaller than
    Adam's. With `alpha=0` it is Adam with a rescaled rate and :math:`\beta_1`. These are
    the numbers and defaults of `optax.contrib.scale_by_simplified_ademamix`. A row-sparse
    gradient is densified first.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      alpha: the weight of the current gradient, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleBySimplifiedAdemamixState(count, m, n)`.

    Raises:
      ValueError: if a beta is outside [0, 1), or `alpha`, `eps` or `eps_root` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_simplified_ademamix(alpha=1.0, eps=0.0)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0].round(4)  # (g + g) / |g|
        Array([ 2., -2.], dtype=float32)

    References:
      Morwani, Shapira, Vyas, Malach, Kakade, Janson, *Connections between schedule-free
      optimizers, AdEMAMix, and accelerated SGD variants*, 2025 (arXiv:2502.02431).
    """
    fn = "scale_by_simplified_ademamix"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "alpha", alpha)
    _check_eps(fn, eps, eps_root)

    return update_rule(
        fn,
        ScaleBySimplifiedAdemamixState,
        _simplified_ademamix_leaf,
        hyper={"b1": b1, "b2": b2, "alpha": alpha, "eps": eps, "eps_root": eps_root},
        slots={"m": 0.0, "n": SQUARES},
        prepare=functools.partial(corrections, b1=None),
    )


@_registry.optimizer("AdEMAMix")
def ademamix(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule = 0.9999,
    alpha: _protocol.ScalarOrSchedule = 5.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdEMAMix: AdamW whose step adds a slow momentum, which remembers gradients over many thousand steps.

    `chain(scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype=mu_dtype),
    add_decayed_weights(weight_decay, mask=mask), scale_by_learning_rate(learning_rate))`: the
    numbers and defaults of `optax.contrib.ademamix`. The paper warms `b3` and `alpha` up with
    schedules (both take one). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the fast first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: decay of the slow first moment, in [0, 1).
      alpha: the weight of the slow moment, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the moments `m1`, `m2` and `nu` (default: each param's dtype).

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m1`, `m2` and `nu`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `alpha`, `eps`, `eps_root`, weight decay
        or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.ademamix(0.1, alpha=0.0, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # alpha 0: Adam's first step, -lr sign(g)
        [-0.1, 0.1]

    References:
      Pagliardini, Ablin, Grangier, *The AdEMAMix optimizer: better, faster, older*, ICLR 2025
      (arXiv:2409.03137).
    """
    return chain(
        scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype=mu_dtype),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


@_registry.optimizer("SimplifiedAdEMAMix")
def simplified_ademamix(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.99,
    b2: _protocol.ScalarOrSchedule = 0.95,
    alpha: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Simplified AdEMAMix: one undamped momentum plus `alpha` times the gradient, over Adam's root.

    `chain(scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root),
    add_decayed_weights(weight_decay, mask=mask), scale_by_learning_rate(learning_rate))`: the
    numbers and defaults of `optax.contrib.simplified_ademamix`. The momentum is not damped by
    :math:`1-\beta_1`, so the rate is about :math:`1-\beta_1` times Adam's. A row-sparse
    gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      alpha: the weight of the current gradient, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `n`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `alpha`, `eps`, `eps_root`, weight decay
        or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.simplified_ademamix(0.1, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr g / |g|
        [-0.1, 0.1]

    References:
      Morwani, Shapira, Vyas, Malach, Kakade, Janson, *Connections between schedule-free
      optimizers, AdEMAMix, and accelerated SGD variants*, 2025 (arXiv:2502.02431).
    """
    return chain(
        scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


__all__ = [
    "ScaleByAdemamixState",
    "ScaleBySimplifiedAdemamixState",
    "ademamix",
    "scale_by_ademamix",
    "scale_by_simplified_ademamix",
    "simplified_ademamix",
]
