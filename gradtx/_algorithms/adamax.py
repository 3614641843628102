"""AdaMax: TF's kernel (`scale_by_adamax`, `adamax`), optax's (`scale_by_bias_corrected_adamax`, `adamaxw`)
and torch's rule."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._algorithms.adam import _doc
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.restated import restated
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByAdamaxState(NamedTuple):
    """State of `scale_by_adamax`."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": first moment (starts at 0)
    v: _protocol.Updates  # TF slot "v": exponentially weighted infinity norm (starts at 0)
    beta1_power: jax.Array  # TF's non-slot "beta1_power": b1**(count+1), a running product


def _adamax_power(h, state, extra_args):
    """TF's running `beta1_power`: the bias correction `1 / (1 - b1^t)`, and the next product."""
    del extra_args
    return {"c": 1 / (1 - state.beta1_power), "beta1_power": state.beta1_power * h.b1}


def _adamax_leaf(g, m, v, h):
    """ApplyAdaMax: `m += (g - m)(1 - b1)`, `v = max(b2 v, |g|)`, the step `m / (v + eps) * c`."""
    m = _formulas.moment_increment(m, g, h.b1)
    v = jnp.maximum(h.b2 * v, jnp.abs(g))
    return (m / (v + h.eps)) * h.c, m, v


def _adamax_row_rule(g, m, v, h):
    """contrib's sparse rule on the touched rows: `m = m b1 + g (1 - b1)`, `v = max(v b2, |g|)`."""
    m = _formulas.moment_blend(m, g, h.b1)
    v = jnp.maximum(v * h.b2, jnp.abs(g))
    return (m / (v + h.eps)) * h.c, m, v


def _adamax_rows(g, m, v, h):
    """contrib's AdaMax on a row-sparse gradient: the touched rows of `m`, `v` and the variable only."""
    return sparse.apply_rows(functools.partial(_adamax_row_rule, h=h), g, m, v)


@_registry.transform()
def scale_by_adamax(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""AdaMax's scaling as contrib's `ApplyAdaMax`, not `optax.scale_by_adamax` (`optax_compat`'s).

    .. math::
        m_t = m_{t-1} + (g_t - m_{t-1})(1-\beta_1), \quad
        v_t = \max(\beta_2 v_{t-1}, |g_t|), \quad
        u_t = \frac{1}{1-\beta_1^t}\,\frac{m_t}{v_t + \epsilon}

    Followed by `scale_by_learning_rate(lr)` this is `tf.contrib.opt.AdaMaxOptimizer`.
    Only `beta1_power` is kept (a float32 running product, as TF). Row-sparse gradients
    change the touched rows only (contrib's Python rule, with
    `m = m*b1 + g*(1-b1)` on those rows).

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to the norm, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleByAdamaxState(count, m, v, beta1_power)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adamax(eps=0.0)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 5) for x in u]  # m = 0.1 g, v = |g|, / (1 - 0.9)
        [1.0, -1.0]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015, section 7.1.
    """
    fn = "scale_by_adamax"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)

    return update_rule(
        fn,
        ScaleByAdamaxState,
        _adamax_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": 0.0, "v": SQUARES},
        scalars={"beta1_power": lambda h: h.b1},
        prepare=_adamax_power,
        sparse=_adamax_rows,
        tf_scalars=True,  # TF's scalars: a float32 beta1_power for float32 params, with or without x64
    )


class ScaleByBiasCorrectedAdamaxState(NamedTuple):
    """State of `scale_by_bias_corrected_adamax`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # the decayed infinity norm (starts at 0)


def _bias_corrected_adamax_leaf(g, m, v, h):
    m = _formulas.optax_moment(m, g, h.b1)
    v = jnp.maximum(jnp.abs(g) + h.eps, h.b2 * v)
    return (m / h.bc1) / v, m, v


def _check_betas(fn: str, b1: Any, b2: Any, eps: Any) -> None:
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)


@_registry.transform()
def scale_by_bias_corrected_adamax(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""AdaMax: the bias-corrected first moment over a decayed infinity norm of the gradients.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad v_t = \max(|g_t| + \epsilon, \beta_2 v_{t-1}),
        \quad u_t = \frac{m_t}{(1-\beta_1^t)\, v_t}

    The numbers of `optax.scale_by_adamax` (epsilon inside the maximum); TF's ApplyAdaMax
    is `scale_by_adamax`. A row-sparse gradient is densified first.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to each gradient's magnitude, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedAdamaxState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_adamax(eps=0.0)
        >>> tx.update(jnp.array([-2.0]), tx.init(jnp.zeros(1)))[0].round(4)  # the first step: sign(g)
        Array([-1.], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 2).
    """
    _check_betas("scale_by_bias_corrected_adamax", b1, b2, eps)
    return update_rule(
        "scale_by_bias_corrected_adamax",
        ScaleByBiasCorrectedAdamaxState,
        _bias_corrected_adamax_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"mu": 0.0, "nu": SQUARES},
        prepare=functools.partial(corrections, b2=None),
    )


@_registry.optimizer("AdaMax")
@_doc
def adamax(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""AdaMax: contrib's `AdaMaxOptimizer` (`ApplyAdaMax`), not `optax.adamax` (`optax_compat.adamax`).

    `var -= lr / (1 - b1**t) * m / (v + eps)` with `v = max(b2 * v, |g|)`. This is
    `chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))`; row-sparse
    gradients change the touched rows only.

    Args:
      {ADAM_ARGS}

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adamax(0.1, eps=0.0)
        >>> [round(float(x), 5) for x in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.1, 0.1]
    """
    return chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


@_registry.optimizer("AdaMaxW")
def adamaxw(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdaMaxW: optax's AdaMax (infinity-norm Adam, bias-corrected) with weight decay multiplied by the rate.

    `chain(scale_by_bias_corrected_adamax(b1, b2, eps), add_decayed_weights(weight_decay,
    mask=mask), scale_by_learning_rate(learning_rate))`: the numbers and defaults of
    `optax.adamaxw` (`weight_decay=0` gives `optax.adamax`). Not `gradtx.adamax`, which is
    tf.contrib's AdaMax (`ApplyAdaMax`: epsilon inside the max). A row-sparse gradient is
    densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to the infinity norm, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adamaxw(0.1, eps=0.0, weight_decay=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr sign(g)
        [-0.1, 0.1]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (section 7.1);
      Loshchilov, Hutter, *Decoupled weight decay regularization*, ICLR 2019.
    """
    return chain(
        scale_by_bias_corrected_adamax(b1, b2, eps),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


class TorchAdamaxState(NamedTuple):
    """State of torch's Adamax (`scale_by_bias_corrected_adamax` under torch's names)."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_inf: _protocol.Updates  # decayed infinity norm, max(b2 u, |g| + eps) (starts at 0)


def adamax_rule(b1: float, b2: float, eps: float) -> _protocol.GradientTransformation:
    """torch's Adamax direction: `scale_by_bias_corrected_adamax` (eps inside the maximum), torch's names."""
    return restated(
        scale_by_bias_corrected_adamax(b1, b2, eps), TorchAdamaxState, {"mu": "exp_avg", "nu": "exp_inf"}
    )


__all__ = [
    "ScaleByAdamaxState",
    "ScaleByBiasCorrectedAdamaxState",
    "adamax",
    "adamaxw",
    "scale_by_adamax",
    "scale_by_bias_corrected_adamax",
]
