"""FAdam (Hwang 2024): Adam as a natural gradient with the diagonal empirical Fisher (pytorch-optimizer's)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY
from gradtx._algorithms.stable_adamw import debiased_beta
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core import sliced as _sliced
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._scale import scale_by_learning_rate

_TORCH_DTYPES = {
    "float32": jnp.float32,
    "float64": jnp.float64,
    "bfloat16": jnp.bfloat16,
    "float16": jnp.float16,
}


def _torch_dtype(name: str, value: Any) -> Any:
    """The JAX dtype of a torch dtype (`torch.float32`, or its name) given to the reference as `name`."""
    key = str(value).removeprefix("torch.")
    if key not in _TORCH_DTYPES:
        raise ValueError(
            f"`gradtx.get('FAdam')`: `{name}` must be one of torch's float dtypes, got {value!r}."
        )
    return _TORCH_DTYPES[key]


def _rms(x: Any, path: Any) -> Any:
    """The RMS of the whole leaf at `path`, on ZeRO's slices too (`_sliced`)."""
    return jnp.sqrt(_sliced.total(jnp.sum(x * x)) / _sliced.leaf_size(path, x))


def _clipped(x: Any, clip: Any, path: Any) -> Any:
    """`x / max(1, rms(x) / clip)`: `x` with its RMS capped at `clip`."""
    return x / jnp.maximum(_rms(x, path) / clip, 1.0)


class ScaleByFAdamState(NamedTuple):
    """State of `scale_by_fadam` (pytorch-optimizer's names)."""

    count: _protocol.Count  # int32: completed updates (the reference's `step`)
    momentum: _protocol.Updates  # the momentum of the clipped natural gradients (starts at 0)
    fim: _protocol.Updates  # the diagonal empirical Fisher, bias-corrected (starts at 0)


def _fadam_leaf(g, momentum, fim, w, h, *, path):
    wide = _scalars.at_least_float32(g.dtype)
    x, w = g.astype(wide), w.astype(wide)
    b2 = debiased_beta(h.b2, h.t, wide)
    fim = fim.astype(wide) * b2 + x * x * (1 - b2)
    rms = _rms(x, path)
    scaled = h.eps_2 * rms
    eps_power = jnp.where((rms > 0) & (scaled < h.eps), scaled ** (2 * h.p), h.eps ** (2 * h.p))
    base = fim**h.p + eps_power
    m = momentum.astype(wide)
    m = _formulas.moment_increment(m, _clipped(x / base, h.clip, path), h.b1)  # torch's lerp
    u = m + h.weight_decay * _clipped(w / base, h.clip, path)
    return u.astype(g.dtype), m, fim


@_registry.transform()
def scale_by_fadam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    weight_decay: _protocol.ScalarOrSchedule = 0.1,
    clip: _protocol.ScalarOrSchedule = 1.0,
    p: _protocol.ScalarOrSchedule = 0.5,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_2: _protocol.ScalarOrSchedule = 0.01,
    *,
    mu_dtype: Any = jnp.float32,
    fim_dtype: Any = jnp.float32,
) -> _protocol.GradientTransformation:
    r"""FAdam's direction: the momentum of clipped natural gradients, plus a preconditioned weight decay.

    .. math::
        \hat\beta_t = \beta_2 \frac{1 - \beta_2^{t-1}}{1 - \beta_2^t}, \quad
        F_t = \hat\beta_t F_{t-1} + (1 - \hat\beta_t) g_t^2, \quad
        \epsilon_t = \begin{cases} \min(\epsilon, \epsilon_2 \operatorname{rms}(g_t))^{2p} &
        \operatorname{rms}(g_t) > 0 \\ \epsilon^{2p} & \text{otherwise}\end{cases}, \\
        \tilde g_t = \operatorname{cap}\Big(\frac{g_t}{F_t^p + \epsilon_t}\Big), \quad
        m_t = \beta_1 m_{t-1} + (1-\beta_1) \tilde g_t, \quad
        u_t = m_t + \lambda \operatorname{cap}\Big(\frac{w_{t-1}}{F_t^p + \epsilon_t}\Big)

    with :math:`\operatorname{cap}(x) = x / \max(1, \operatorname{rms}(x)/c)` over each parameter.
    The gradient is divided by the Fisher's root before the momentum (Adam read as a natural
    gradient), and the weight decay is preconditioned and capped alike. These are the numbers of
    pytorch-optimizer's `FAdam`, which gradtx follows where they go beyond the paper's Algorithm 1:
    the Fisher is averaged with debiased decays (bias-corrected as it goes), and the stabilizer
    :math:`\epsilon_t` shrinks with the gradient's RMS (`eps_2`; `eps_2=0` drops it for a nonzero
    gradient). The slots are kept in float32 by
    default whatever the params' dtype (the reference's `momentum_dtype`, `fim_dtype`). A row-sparse
    gradient is densified first.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the Fisher estimate, in [0, 1).
      weight_decay: :math:`\lambda`, the preconditioned decay, >= 0.
      clip: :math:`c`, the RMS cap of the natural gradient and of the decay, > 0.
      p: the power of the Fisher in the preconditioner, > 0.
      eps: :math:`\epsilon`, the stabilizer's bound, >= 0.
      eps_2: :math:`\epsilon_2`, the gradient-RMS multiplier of the adaptive stabilizer, >= 0.
      mu_dtype: dtype of `momentum` (default float32).
      fim_dtype: dtype of `fim` (default float32).

    Returns:
      A `SliceWise` transform with state `ScaleByFAdamState(count, momentum, fim)`.

    Raises:
      ValueError: for a beta outside [0, 1), a non-positive `clip` or `p`, a negative `eps`,
        `eps_2` or `weight_decay`.
      TypeError: for a `mu_dtype` or `fim_dtype` that is not a float dtype.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_fadam(weight_decay=0.0)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0].round(6)  # 0.1 sign(g): F = g^2
        Array([ 0.1, -0.1], dtype=float32)

    References:
      Hwang, *FAdam: Adam is a natural gradient optimizer using diagonal empirical Fisher
      information* (2024), arXiv:2405.12807; pytorch-optimizer's `FAdam`.
    """
    fn = "scale_by_fadam"
    _check(fn, b1, b2, weight_decay, clip, p, eps, eps_2)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_float_dtype(fn, "fim_dtype", fim_dtype)
    return update_rule(
        fn,
        ScaleByFAdamState,
        _fadam_leaf,
        hyper={
            "b1": b1,
            "b2": b2,
            "weight_decay": weight_decay,
            "clip": clip,
            "p": p,
            "eps": eps,
            "eps_2": eps_2,
        },
        slots={"momentum": Slot(0.0, mu_dtype), "fim": Slot(0.0, fim_dtype, nonnegative=True)},
        reads_params=True,
        kind=_protocol.SliceWise,  # its RMS is the whole leaf's, on ZeRO's slices too (`_rms`)
        real_only=_REAL_ONLY,
        compute_dtype=_scalars.at_least_float32,
        paths=True,
    )


def _check(fn, b1, b2, weight_decay, clip, p, eps, eps_2):
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_positive(fn, "clip", clip)
    _checks.check_positive(fn, "p", p)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps_2", eps_2)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.FAdam",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "clip": "clip",
            "p": "p",
            "eps": "eps",
            "eps_2": "eps_2",
            "momentum_dtype": lambda v: {"mu_dtype": _torch_dtype("momentum_dtype", v)},
            "fim_dtype": lambda v: {"fim_dtype": _torch_dtype("fim_dtype", v)},
        },
        defaults={
            "lr": 1e-3,
            "betas": (0.9, 0.999),
            "momentum_dtype": "torch.float32",
            "fim_dtype": "torch.float32",
        },
        fixed={"maximize": False},
    )
)
def fadam(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    weight_decay: _protocol.ScalarOrSchedule = 0.1,
    clip: _protocol.ScalarOrSchedule = 1.0,
    p: _protocol.ScalarOrSchedule = 0.5,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_2: _protocol.ScalarOrSchedule = 0.01,
    *,
    mu_dtype: Any = jnp.float32,
    fim_dtype: Any = jnp.float32,
) -> _protocol.GradientTransformation:
    r"""FAdam: Adam as a natural-gradient method, with a preconditioned weight decay.

    `chain(scale_by_fadam(b1, b2, weight_decay, clip, p, eps, eps_2), scale_by_learning_rate(
    learning_rate))`: :math:`w_t = w_{t-1} - \eta u_t`, the numbers and defaults of
    pytorch-optimizer's `FAdam` (`gradtx.get("FAdam", lr=..., betas=...)` takes its arguments; its
    `momentum_dtype` and `fim_dtype`, torch dtypes or their names, become `mu_dtype` and
    `fim_dtype`). Its slots are `momentum` and `fim`, float32 by default. A row-sparse gradient is
    densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1).
      b2: decay of the Fisher estimate, in [0, 1).
      weight_decay: :math:`\lambda`, the preconditioned decay, >= 0.
      clip: the RMS cap of the natural gradient and of the decay, > 0.
      p: the power of the Fisher in the preconditioner, > 0.
      eps: the stabilizer's bound, >= 0.
      eps_2: the gradient-RMS multiplier of the adaptive stabilizer, >= 0.
      mu_dtype: dtype of `momentum` (default float32).
      fim_dtype: dtype of `fim` (default float32).

    Returns:
      A `SliceWise` chain; its slots are `momentum` and `fim`.

    Raises:
      ValueError: for a beta outside [0, 1), a non-positive `clip` or `p`, a negative `eps`,
        `eps_2`, weight decay or rate.
      TypeError: for a `mu_dtype` or `fim_dtype` that is not a float dtype.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.fadam(0.1, weight_decay=0.0)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0].round(6)  # -0.1 lr sign(g)
        Array([-0.01,  0.01], dtype=float32)

    References:
      Hwang, *FAdam: Adam is a natural gradient optimizer using diagonal empirical Fisher
      information* (2024), arXiv:2405.12807; pytorch-optimizer's `FAdam` (the reference of the tests).
    """
    fn = "fadam"
    _checks.check_learning_rate(fn, learning_rate)
    _check(fn, b1, b2, weight_decay, clip, p, eps, eps_2)
    return chain(
        scale_by_fadam(b1, b2, weight_decay, clip, p, eps, eps_2, mu_dtype=mu_dtype, fim_dtype=fim_dtype),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByFAdamState", "fadam", "scale_by_fadam"]
