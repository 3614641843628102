r"""torch.optim's per-parameter formulas where no gradtx building block has torch's numbers.

Each rule is the body of torch's `_single_tensor_<name>` for one parameter, written with
`update_rule`; the learning rate, `maximize` and weight decay are links of the chain that
`_torch_optim` builds around it. State fields carry torch's state names (`exp_avg`,
`momentum_buffer`, ...; torch's `step` is gradtx's `count`). torch computes its scalars
(bias corrections, RAdam's :math:`\rho_t`, NAdam's :math:`\mu_t`) in double precision; here
they are formed so that float32 keeps torch's digits: :math:`1-\beta^t` as
`-expm1(t log beta)` and :math:`\rho_t` by its series where the closed form cancels.
Adamax, Adadelta and Lion reuse gradtx's blocks (`scale_by_bias_corrected_adamax`,
`scale_by_adadelta`, `scale_by_lion`) under torch's state names.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import scalars as _scalars
from gradtx._core.rule import restated, update_rule
from gradtx.transforms import scale_by_adadelta, scale_by_bias_corrected_adamax, scale_by_lion

_REAL_ONLY = "torch's optimizers treat a complex parameter as pairs of reals (view_as_real)"


class TorchSGDState(NamedTuple):
    """State of torch's SGD rule."""

    count: _protocol.Count  # int32: completed updates (torch keeps no step for SGD)
    momentum_buffer: _protocol.Updates  # torch's "momentum_buffer" (None for momentum 0)


class TorchAdamState(NamedTuple):
    """State of torch's Adam / AdamW rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # second moment (starts at 0)
    max_exp_avg_sq: _protocol.Updates  # running maximum of exp_avg_sq (amsgrad), else None


class TorchRAdamState(NamedTuple):
    """State of torch's RAdam rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # second moment (starts at 0)


class TorchNAdamState(NamedTuple):
    """State of torch's NAdam rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # second moment (starts at 0)
    mu_product: Any  # torch's "mu_product": the product of the mu_t so far (starts at 1), float32


class TorchAdagradState(NamedTuple):
    """State of torch's Adagrad rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    sum: _protocol.Updates  # torch's "sum" of squared gradients (starts at initial_accumulator_value)


class TorchRMSpropState(NamedTuple):
    """State of torch's RMSprop rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    square_avg: _protocol.Updates  # mean square (starts at 0)
    momentum_buffer: _protocol.Updates  # for momentum > 0 (starts at 0), else None
    grad_avg: _protocol.Updates  # mean gradient when centered (starts at 0), else None


class TorchAdamaxState(NamedTuple):
    """State of torch's Adamax (`scale_by_bias_corrected_adamax` under torch's names)."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_inf: _protocol.Updates  # decayed infinity norm, max(b2 u, |g| + eps) (starts at 0)


class TorchAdadeltaState(NamedTuple):
    """State of torch's Adadelta (`scale_by_adadelta` under torch's names)."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    square_avg: _protocol.Updates  # mean squared gradient (starts at 0)
    acc_delta: _protocol.Updates  # mean squared step (starts at 0)


class TorchLionState(NamedTuple):
    """State of RETURNN's Lion (`scale_by_lion` under its names)."""

    count: _protocol.Count  # int32: completed updates (Lion keeps no step)
    exp_avg: _protocol.Updates  # the momentum (starts at 0)


# --------------------------------------------------------------------------- torch's double-precision scalars


def _dtype(g: Any) -> Any:
    """The dtype the step's scalars are formed in: float32 at least (float64 for float64 leaves)."""
    return _scalars.at_least_float32(g.dtype)


def correction(beta: float, t: Any, dtype: Any) -> Any:
    """`1 - beta**t` for a Python `beta` in [0, 1) and the 1-based step `t`, to float32's precision.

    `-expm1(t log beta)`: the power of a float32-rounded beta (optax's) is off by 1e-5 relative for
    beta = 0.999 at t = 1; torch forms it in double.
    """
    if beta == 0:
        return jnp.ones((), dtype)
    return -jnp.expm1(jnp.asarray(t, dtype) * math.log(beta))


# 2 B_n / n! for the Bernoulli numbers B_2 .. B_14: the series of `_rho` to float64's digits (s < 1)
_RHO_SERIES = tuple(
    (n, 2 * b / math.factorial(n))
    for n, b in (
        (2, 1 / 6),
        (4, -1 / 30),
        (6, 1 / 42),
        (8, -1 / 30),
        (10, 5 / 66),
        (12, -691 / 2730),
        (14, 7 / 6),
    )
)


def _rho(t: Any, b2: float, dtype: Any) -> Any:
    r"""RAdam's :math:`\rho_t = \rho_\infty - 2 t \beta_2^t / (1 - \beta_2^t)` with torch's (double) digits.

    With :math:`L = -\log\beta_2` and :math:`s = tL`, :math:`\rho_t = \frac{2}{L}(f(-L) - f(s)) - 1` for
    :math:`f(x) = x/(e^x - 1) = \sum_n B_n x^n / n!`. Below :math:`s = 1` its Bernoulli series term by term,
    :math:`\rho_t = t + \sum_{n=2,4,..} \frac{2 B_n}{n!} (L^{n-1} - s^{n-1} t)` (the closed form cancels
    there: :math:`\rho_\infty \approx 2/L` against :math:`\rho_t \approx t`); above it, the closed form.
    """
    big_l = -math.log(b2)
    t = jnp.asarray(t, dtype)
    s = t * big_l
    small = s < 1
    ts, ss = jnp.where(small, t, 0.0), jnp.where(small, s, 0.0)  # the series where it converges
    series = ts
    for n, coef in _RHO_SERIES:  # no power of t alone: s <= 1 keeps every term finite
        series = series + coef * (big_l ** (n - 1) - ss ** (n - 1) * ts)
    rho_inf = 2 / (1 - b2) - 1
    sc = jnp.where(small, 1.0, s)
    closed = rho_inf - (2 / big_l) * (sc / jnp.expm1(sc))
    return jnp.where(small, series, closed)


def _moments(g: Any, exp_avg: Any, exp_avg_sq: Any, h: Any) -> tuple[Any, Any]:
    """Adam's moments as torch updates them: `exp_avg.lerp_(g, 1 - b1)`, `exp_avg_sq = b2 v + (1-b2) g^2`."""
    return _formulas.moment_increment(exp_avg, g, h.b1), _formulas.moment_blend(exp_avg_sq, g * g, h.b2)


# --------------------------------------------------------------------------- the formulas


def _sgd_leaf(g, buf, h, *, nesterov: bool, dampened: bool):
    """`_single_tensor_sgd`: the buffer starts as the first gradient, then `m buf + (1 - dampening) g`."""
    if buf is None:
        return g, None
    if dampened:
        buf = jnp.where(h.count == 0, g, buf * h.momentum + g * (1 - h.dampening))
    else:  # dampening 0: a zero buffer gives the first gradient as it is
        buf = buf * h.momentum + g
    return (g + buf * h.momentum if nesterov else buf), buf


def _adam_leaf(g, exp_avg, exp_avg_sq, max_exp_avg_sq, h):
    """`_single_tensor_adam`: `(m / bc1) / (sqrt(v) / sqrt(bc2) + eps)`; amsgrad: the max of the raw `v`."""
    exp_avg, exp_avg_sq = _moments(g, exp_avg, exp_avg_sq, h)
    dtype = _dtype(g)
    v = exp_avg_sq
    if max_exp_avg_sq is not None:
        max_exp_avg_sq = jnp.maximum(max_exp_avg_sq, exp_avg_sq)
        v = max_exp_avg_sq
    denom = jnp.sqrt(v) / jnp.sqrt(correction(h.b2, h.t, dtype)) + h.eps
    return (exp_avg / correction(h.b1, h.t, dtype)) / denom, exp_avg, exp_avg_sq, max_exp_avg_sq


def _radam_leaf(g, exp_avg, exp_avg_sq, h):
    """`_single_tensor_radam`: `m_hat * r_t * sqrt(bc2) / (sqrt(v) + eps)` where `rho_t > 5`, else `m_hat`."""
    exp_avg, exp_avg_sq = _moments(g, exp_avg, exp_avg_sq, h)
    dtype = _dtype(g)
    m_hat = exp_avg / correction(h.b1, h.t, dtype)
    rho_inf = 2 / (1 - h.b2) - 1 if h.b2 > 0 else 1.0
    if rho_inf <= 5:  # rho_t < rho_inf: never rectified
        return m_hat, exp_avg, exp_avg_sq
    rho_t = _rho(h.t, h.b2, dtype)
    rho_c = jnp.maximum(rho_t, 5.0)  # the rectification is only read where rho_t > 5
    rect = jnp.sqrt((rho_c - 4) * (rho_c - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_c))
    adaptive = jnp.sqrt(correction(h.b2, h.t, dtype)) / (jnp.sqrt(exp_avg_sq) + h.eps)
    return jnp.where(rho_t > 5, m_hat * adaptive * rect, m_hat), exp_avg, exp_avg_sq


def _nadam_prepare(h, state, extra_args):
    r"""NAdam's :math:`\mu_t = \beta_1 (1 - 0.5 \cdot 0.96^{t\psi})`, :math:`\mu_{t+1}` and their product."""
    del extra_args
    dtype = state.mu_product.dtype
    t = jnp.asarray(h.t, dtype)
    log_decay = h.momentum_decay * math.log(0.96)
    mu = h.b1 * (1 - 0.5 * jnp.exp(t * log_decay))
    mu_next = h.b1 * (1 - 0.5 * jnp.exp((t + 1) * log_decay))
    mu_product = state.mu_product * mu
    return {"mu": mu, "mu_next": mu_next, "mu_product": mu_product, "bc2": correction(h.b2, h.t, dtype)}


def _nadam_leaf(g, exp_avg, exp_avg_sq, h):
    """`_single_tensor_nadam`: `((1-mu)/(1-prod) g + mu_next/(1-prod mu_next) m) / (sqrt(v / bc2) + eps)`."""
    exp_avg, exp_avg_sq = _moments(g, exp_avg, exp_avg_sq, h)
    denom = jnp.sqrt(exp_avg_sq / h.bc2) + h.eps
    c_grad = (1 - h.mu) / (1 - h.mu_product)
    c_avg = h.mu_next / (1 - h.mu_product * h.mu_next)
    return (g * c_grad) / denom + (exp_avg * c_avg) / denom, exp_avg, exp_avg_sq


def _adagrad_leaf(g, state_sum, h, *, decayed: bool):
    """`_single_tensor_adagrad`: `g / (sqrt(sum) + eps)`, divided by `1 + (t - 1) lr_decay`."""
    state_sum = state_sum + g * g
    u = g / (jnp.sqrt(state_sum) + h.eps)
    if decayed:
        u = u / (1 + jnp.asarray(h.count, _dtype(g)) * h.lr_decay)
    return u, state_sum


def _rmsprop_leaf(g, square_avg, buf, grad_avg, h):
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


# --------------------------------------------------------------------------- the rules


def sgd_rule(momentum: float, dampening: float, *, nesterov: bool) -> _protocol.GradientTransformation:
    """torch's SGD direction (momentum buffer, dampening, Nesterov), before the rate."""
    leaf = functools.partial(_sgd_leaf, nesterov=nesterov, dampened=dampening != 0)
    return update_rule(
        "torch_sgd", TorchSGDState, leaf, hyper={"momentum": momentum, "dampening": dampening},
        slots={"momentum_buffer": 0.0 if momentum != 0 else None}, real_only=_REAL_ONLY,
    )  # fmt: skip


def adam_rule(b1: float, b2: float, eps: float, *, amsgrad: bool) -> _protocol.GradientTransformation:
    """torch's Adam direction (the step before `-lr`), with amsgrad's maximum of the raw second moment."""
    return update_rule(
        "torch_adam", TorchAdamState, _adam_leaf, hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"exp_avg": 0.0, "exp_avg_sq": 0.0, "max_exp_avg_sq": 0.0 if amsgrad else None},
        real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


def radam_rule(b1: float, b2: float, eps: float) -> _protocol.GradientTransformation:
    """torch's RAdam direction (rectified where rho_t > 5, else the corrected momentum)."""
    return update_rule(
        "torch_radam", TorchRAdamState, _radam_leaf, hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"exp_avg": 0.0, "exp_avg_sq": 0.0}, real_only=_REAL_ONLY,
        compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


def nadam_rule(b1: float, b2: float, eps: float, momentum_decay: float) -> _protocol.GradientTransformation:
    """torch's NAdam direction (the mu_t schedule and its running product)."""
    return update_rule(
        "torch_nadam", TorchNAdamState, _nadam_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps, "momentum_decay": momentum_decay},
        slots={"exp_avg": 0.0, "exp_avg_sq": 0.0}, scalars={"mu_product": lambda h: 1.0},
        prepare=_nadam_prepare, real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


def adagrad_rule(
    lr_decay: float, initial_accumulator_value: float, eps: float
) -> _protocol.GradientTransformation:
    """torch's Adagrad direction (eps outside the root, the rate decayed by `1 + (t - 1) lr_decay`)."""
    return update_rule(
        "torch_adagrad", TorchAdagradState, functools.partial(_adagrad_leaf, decayed=lr_decay != 0),
        hyper={"lr_decay": lr_decay, "eps": eps}, slots={"sum": initial_accumulator_value},
        real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


def rmsprop_rule(
    alpha: float, eps: float, momentum: float, *, centered: bool
) -> _protocol.GradientTransformation:
    """torch's RMSprop direction (eps outside the root, the rate outside the momentum buffer)."""
    return update_rule(
        "torch_rmsprop", TorchRMSpropState, _rmsprop_leaf,
        hyper={"alpha": alpha, "eps": eps, "momentum": momentum},
        slots={"square_avg": 0.0, "momentum_buffer": 0.0 if momentum > 0 else None,
               "grad_avg": 0.0 if centered else None},
        real_only=_REAL_ONLY,
    )  # fmt: skip


def adamax_rule(b1: float, b2: float, eps: float) -> _protocol.GradientTransformation:
    """torch's Adamax direction: `scale_by_bias_corrected_adamax` (eps inside the maximum), torch's names."""
    return restated(
        scale_by_bias_corrected_adamax(b1, b2, eps), TorchAdamaxState, {"m": "exp_avg", "v": "exp_inf"}
    )


def adadelta_rule(rho: float, eps: float) -> _protocol.GradientTransformation:
    """torch's Adadelta direction: `scale_by_adadelta` (TF's formula) as torch names it."""
    return restated(
        scale_by_adadelta(rho, eps), TorchAdadeltaState, {"accum": "square_avg", "accum_update": "acc_delta"}
    )


def lion_rule(b1: float, b2: float) -> _protocol.GradientTransformation:
    """RETURNN's Lion direction: `scale_by_lion` (the sign of the blend) as RETURNN names it."""
    return restated(scale_by_lion(b1, b2), TorchLionState, {"m": "exp_avg"})


__all__ = [
    "TorchAdadeltaState", "TorchAdagradState", "TorchAdamState", "TorchAdamaxState", "TorchLionState",
    "TorchNAdamState", "TorchRAdamState", "TorchRMSpropState", "TorchSGDState", "adadelta_rule",
    "adagrad_rule", "adam_rule", "adamax_rule", "correction", "lion_rule", "nadam_rule", "radam_rule",
    "rmsprop_rule", "sgd_rule",
]  # fmt: skip
