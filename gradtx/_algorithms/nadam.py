"""Nadam: tf.contrib's (`scale_by_nesterov_adam`, `nadam`), optax's `nadamw` and torch's rule."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import (
    _REAL_ONLY,
    _adam_family,
    _adam_step,
    _decayed_moments,
    _doc,
    _moments,
    _powers_from_state,
    _stored,
    scale_by_bias_corrected_adam,
    squared_as,
)
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.chain import chain
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


def _nesterov(m, g, h):
    """Nesterov's numerator, as ApplyAdam(use_nesterov=True): `(1 - b1) g + b1 m`."""
    return g * (1 - h.b1) + h.b1 * m


def _nesterov_leaf(g, m, v, h):
    """contrib's Nadam: ApplyAdam's moments, the Nesterov numerator."""
    m = _stored(_formulas.moment_increment(m, g, h.b1), m.dtype)
    v = _formulas.moment_increment(v, squared_as(g, v), h.b2)
    return _adam_step(_nesterov(m, g, h), v, h), m, v


def _nesterov_rows(g, m, v, h):
    """contrib's Nadam on a row-sparse gradient: the moments decay on all rows, the touched rows move."""
    g = g.deduplicated()
    m, v = _decayed_moments(g, m, v, h)
    rows = _adam_step(_nesterov(g.gather(m), g.values, h), g.gather(v), h)
    return g.with_values(g.zero_padding(rows)), m, v


@_registry.transform()
@_doc
def scale_by_nesterov_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam with a Nesterov numerator, as `ApplyAdam(use_nesterov=True)` (contrib's Nadam kernel).

    .. math::
        u_t = \frac{\big((1-\beta_1) g_t + \beta_1 m_t\big) \sqrt{1-\beta_2^t}/(1-\beta_1^t)}
        {\sqrt{v_t} + \hat\epsilon}

    with the moments and beta powers of `scale_by_adam`. There is no momentum schedule (it
    is not Keras' or optax's Nadam). A row-sparse gradient decays the moments on all rows
    and moves the touched rows of the variable only (contrib's sparse rule).

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState`.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_nesterov_adam()
        >>> u, _ = tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))
        >>> round(float(u[0]), 4)  # (0.1 g + 0.9 m) c / sqrt(v): 1.9
        1.9

    References:
      Dozat, *Incorporating Nesterov momentum into Adam*, ICLR 2016 workshop.
    """
    fn = "scale_by_nesterov_adam"
    return _adam_family(
        fn, b1, b2, eps, mu_dtype, _nesterov_leaf, _nesterov_rows, _powers_from_state, nu_dtype
    )


@_registry.optimizer("Nadam")
@_doc
def nadam(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Nadam: contrib's `NadamOptimizer` (TF's Nesterov kernel), not `optax.nadam` (`optax_compat.nadam`).

    `var -= alpha * ((1 - b1) * g + b1 * m) / (sqrt(v) + eps)`; there is no momentum
    schedule, and it is NOT Keras' Nadam. Row-sparse gradients: the moments decay on all
    rows, the variable moves on the touched rows only (contrib's sparse rule). This is
    `chain(scale_by_nesterov_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))`.

    Args:
      {ADAM_ARGS}
      {MU_DTYPE}

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.nadam(0.1)
        >>> round(float(tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0][0]), 4)
        -0.19
    """
    return chain(
        scale_by_nesterov_adam(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


@_registry.optimizer("NAdamW")
def nadamw(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""NAdamW: Adam with Nesterov's first moment (Dozat's NAdam) and weight decay multiplied by the rate.

    `chain(scale_by_bias_corrected_adam(b1, b2, eps, eps_root, nesterov=True,
    mu_dtype=mu_dtype), add_decayed_weights(weight_decay, mask=mask),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.nadamw`
    (`weight_decay=0` gives `optax.nadam`). Not `gradtx.nadam`, which is tf.contrib's Nadam
    (TF1's epsilon-hat Adam with a Nesterov kernel, no decay). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype).
      nu_dtype: dtype of the second moment `v` (default: each param's dtype).

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.nadamw(0.1, eps=0.0, weight_decay=0.0)
        >>> params = jnp.zeros(2)
        >>> u = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0]
        >>> [round(float(x), 4) for x in u]  # -lr (b1 / (1 + b1) + 1) sign(g)
        [-0.1474, 0.1474]

    References:
      Dozat, *Incorporating Nesterov momentum into Adam*, ICLR 2016 workshop; Loshchilov,
      Hutter, *Decoupled weight decay regularization*, ICLR 2019.
    """
    return chain(
        scale_by_bias_corrected_adam(
            b1, b2, eps, eps_root, nesterov=True, mu_dtype=mu_dtype, nu_dtype=nu_dtype
        ),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


class TorchNAdamState(NamedTuple):
    """State of torch's NAdam rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # second moment (starts at 0)
    mu_product: Any  # torch's "mu_product": the product of the mu_t so far (starts at 1), float32


def _nadam_prepare(h, state, extra_args):
    r"""NAdam's :math:`\mu_t = \beta_1 (1 - 0.5 \cdot 0.96^{t\psi})`, :math:`\mu_{t+1}` and their product."""
    del extra_args
    dtype = state.mu_product.dtype
    t = jnp.asarray(h.t, dtype)
    log_decay = h.momentum_decay * math.log(0.96)
    mu = h.b1 * (1 - 0.5 * jnp.exp(t * log_decay))
    mu_next = h.b1 * (1 - 0.5 * jnp.exp((t + 1) * log_decay))
    mu_product = state.mu_product * mu
    return {
        "mu": mu,
        "mu_next": mu_next,
        "mu_product": mu_product,
        "bc2": _formulas.torch_debias(h.b2, h.t, dtype),
    }


def _nadam_leaf(g, exp_avg, exp_avg_sq, h):
    """`_single_tensor_nadam`: `((1-mu)/(1-prod) g + mu_next/(1-prod mu_next) m) / (sqrt(v / bc2) + eps)`."""
    exp_avg, exp_avg_sq = _moments(g, exp_avg, exp_avg_sq, h)
    denom = jnp.sqrt(exp_avg_sq / h.bc2) + h.eps
    c_grad = (1 - h.mu) / (1 - h.mu_product)
    c_avg = h.mu_next / (1 - h.mu_product * h.mu_next)
    return (g * c_grad) / denom + (exp_avg * c_avg) / denom, exp_avg, exp_avg_sq


def nadam_rule(b1: float, b2: float, eps: float, momentum_decay: float) -> _protocol.GradientTransformation:
    """torch's NAdam direction (the mu_t schedule and its running product)."""
    return update_rule(
        "torch_nadam", TorchNAdamState, _nadam_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps, "momentum_decay": momentum_decay},
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES}, scalars={"mu_product": lambda h: 1.0},
        prepare=_nadam_prepare, real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


__all__ = ["nadam", "nadamw", "scale_by_nesterov_adam"]
