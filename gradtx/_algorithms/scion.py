"""SCION: steps along the linear minimisation oracle of a norm chosen per leaf (`scion`, `scion_light`), the
spectral norm's by Newton-Schulz."""

from __future__ import annotations

import enum
import functools
import math
from typing import Any, Mapping, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.newton_schulz import coefficient_schedule, rows_work
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._weight_decay import torch_weight_decay


class LMONorm(enum.IntEnum):
    """The norms of SCION's linear minimisation oracle (pytorch-optimizer's `LMONorm`, same values)."""

    NONE = 0
    AUTO = 1
    SPECTRAL = 2
    SPECTRALCONV = 3
    SIGN = 4
    BIAS = 5
    COL = 6
    ROW = 7


_OPTIONS: dict[LMONorm, dict[str, Any]] = {
    LMONorm.NONE: {},
    LMONorm.AUTO: {},
    LMONorm.SPECTRAL: {"max_scale": False, "normalize": True, "num_steps": 5},
    LMONorm.SPECTRALCONV: {"num_steps": 5},
    LMONorm.SIGN: {"zero_init": False, "normalize": True},
    LMONorm.BIAS: {},
    LMONorm.COL: {"normalized": False, "transpose": False},
    LMONorm.ROW: {"normalized": True, "transpose": False},
}
"""Each norm's options (`norm_kwargs`) and their defaults; AUTO, BIAS and NONE take none (the reference
ignores what they are given)."""

LMO_EPS = 1e-8
"""The epsilon of the column, row and bias norms' divisions (pytorch-optimizer's)."""


def _check_norm(fn: str, norm_type: Any, norm_kwargs: Any) -> tuple[LMONorm, dict[str, Any]]:
    """`(norm, options)`: `norm_type` a `LMONorm`, its int or its name; `norm_kwargs` that norm's options."""
    names = {n.name.lower(): n for n in LMONorm} | {"spectral_conv": LMONorm.SPECTRALCONV}
    if isinstance(norm_type, str) and norm_type.lower() in names:
        norm = names[norm_type.lower()]
    elif isinstance(norm_type, int) and not isinstance(norm_type, bool) and norm_type in set(LMONorm):
        norm = LMONorm(norm_type)
    else:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `norm_type` must be a `LMONorm`, its value 0-7 or its name "
            f"({', '.join(sorted(names))}); got {norm_type!r}."
        )
    options = dict(_OPTIONS[norm])
    if norm_kwargs is None or norm in (LMONorm.AUTO, LMONorm.BIAS, LMONorm.NONE):
        return norm, options
    if not isinstance(norm_kwargs, Mapping):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `norm_kwargs` must be a dict or None, got {norm_kwargs!r}."
        )
    for k, v in norm_kwargs.items():
        if k not in options:
            raise ValueError(
                f"`{_checks.api_name(fn)}`: `norm_kwargs` of the {norm.name} norm takes "
                f"{', '.join(options) or 'nothing'}; got {k!r}."
            )
        if k == "num_steps":
            _checks.check_int(fn, "norm_kwargs['num_steps']", v, minimum=1)
        else:
            _checks.check_bool(fn, f"norm_kwargs[{k!r}]", v)
        options[k] = v
    return norm, options


def _spectral(d, num_steps: int, factor: float):
    """The Newton-Schulz polar factor of `d` (a matrix of `shape[0]` rows) times `factor`."""
    if d.size == 0:
        return d
    out = (yield rows_work(d, coefficient_schedule("scion", "original", num_steps)))[0].reshape(d.shape)
    return _placement.placed_like(out * factor, d)


def _rank(norm: LMONorm, d, ranks: tuple[int, ...]) -> None:
    if d.ndim not in ranks:
        raise ValueError(
            f"`scion`: the {norm.name} norm takes leaves of rank {' or '.join(map(str, ranks))}, got a "
            f"leaf of shape {d.shape}; choose its norm per leaf with `gradtx.partition`."
        )


def lmo(d, norm: LMONorm, options: Mapping[str, Any]):
    """The direction of steepest descent of unit `norm` along `d` (pytorch-optimizer's `Norm.lmo`): a
    generator that yields its matrix work, if any (`gradtx._core.matrix_work.evaluate` runs it here)."""
    if norm == LMONorm.AUTO:
        if d.ndim <= 1:
            norm = LMONorm.BIAS
        else:
            _rank(LMONorm.AUTO, d, (2, 3, 4))
            norm = LMONorm.SPECTRAL if d.ndim == 2 else LMONorm.SPECTRALCONV
        options = _OPTIONS[norm]
    if norm == LMONorm.NONE:
        return d
    if norm == LMONorm.BIAS:  # over the first axis
        rms = jnp.abs(d) if d.ndim == 0 else jnp.sqrt(jnp.mean(d * d, axis=0, keepdims=True))
        return d / (rms + LMO_EPS)
    if norm == LMONorm.SPECTRAL:
        _rank(norm, d, (2,))
        scale = math.sqrt(d.shape[0] / d.shape[1]) if options["normalize"] else math.sqrt(d.shape[0])
        scale = max(1.0, scale) if options["max_scale"] else scale
        return (yield from _spectral(d, options["num_steps"], scale))
    if norm == LMONorm.SPECTRALCONV:
        _rank(norm, d, (2, 3, 4))
        factor = math.sqrt(d.shape[0] / d.shape[1]) / math.prod(d.shape[2:])
        return (yield from _spectral(d, options["num_steps"], factor))
    if norm == LMONorm.SIGN:
        _rank(norm, d, (2, 3, 4))
        return jnp.sign(d) / d.shape[1] if options["normalize"] else jnp.sign(d)
    _rank(norm, d, (2,))
    x = d.T if options["transpose"] else d
    if norm == LMONorm.COL:
        rms = jnp.sqrt(jnp.sum(x * x, axis=0, keepdims=True)) / math.sqrt(x.shape[0])
        rms = rms * x.shape[1] if options["normalized"] else rms
    else:
        rms = jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True))
        rms = rms * math.sqrt(x.shape[-1]) if options["normalized"] else rms
    x = x / (rms + LMO_EPS)
    return x.T if options["transpose"] else x


class ScaleByScionState(NamedTuple):
    """State of SCION's direction."""

    count: _protocol.Count  # int32: completed updates
    d: _protocol.Updates  # SCION's averaged gradient; SCION-light's gradient buffer (starts at 0)


def _scion_leaf(g, d, h, *, norm, options, light):
    """One leaf: `(scale * lmo(d), d)`, `d` SCION's average or SCION-light's buffer."""
    d = g + (1 - h.momentum) * d if light else _formulas.optax_moment(d, g, 1 - h.momentum)
    return h.scale * (yield from lmo(d, norm, options)), d


def _scion(
    fn,
    learning_rate,
    momentum,
    scale,
    weight_decay,
    constraint,
    norm_type,
    norm_kwargs,
    weight_decouple,
    mu_dtype,
    light,
):
    """SCION or SCION-light, its arguments checked under `fn`."""
    _checks.check_in_range(fn, "momentum", momentum, 0.0, 1.0, low_open=True)
    _checks.check_finite(fn, "scale", scale)
    _checks.check_positive(fn, "scale", scale)
    _checks.check_finite(fn, "weight_decay", weight_decay)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_bool(fn, "constraint", constraint)
    _checks.check_bool(fn, "weight_decouple", weight_decouple)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    norm, options = _check_norm(fn, norm_type, norm_kwargs)
    direction = update_rule(
        fn,
        ScaleByScionState,
        functools.partial(_scion_leaf, norm=norm, options=options, light=light),
        hyper={"momentum": momentum, "scale": scale},
        slots={"d": Slot(0.0, mu_dtype)},
        kind=_protocol.LeafWise,  # norms of whole leaves
        real_only="its oracles are those of real norms",
    )
    if constraint:  # the conditional gradient: w <- (1 - lr) w - lr u, no other decay
        return torch_weight_decay(direction, learning_rate, 1.0)
    return torch_weight_decay(direction, learning_rate, weight_decay, decouple=weight_decouple)


_REFERENCE_ARGUMENTS = {
    "lr": "learning_rate",
    "momentum": "momentum",
    "constraint": "constraint",
    "norm_type": "norm_type",
    "norm_kwargs": "norm_kwargs",
    "scale": "scale",
    "weight_decay": "weight_decay",
    "weight_decouple": "weight_decouple",
}


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.SCION", _REFERENCE_ARGUMENTS, defaults={"lr": 1e-3}, fixed={"maximize": False}
    )
)
def scion(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule = 0.1,
    scale: _protocol.ScalarOrSchedule = 1.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    constraint: bool = False,
    norm_type: Any = LMONorm.AUTO,
    norm_kwargs: Mapping[str, Any] | None = None,
    weight_decouple: bool = True,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""SCION: a step along the linear minimisation oracle (LMO) of a norm, of an average of the gradients.

    .. math::
        d_t = (1-\alpha) d_{t-1} + \alpha g_t, \qquad
        u_t = \rho\, \operatorname{lmo}(d_t) = \rho \operatorname*{arg\,max}_{\lVert u\rVert \le 1}
        \langle d_t, u\rangle, \qquad
        w_t = w_{t-1} - \eta u_t \ \text{(unconstrained)} \quad\text{or}\quad
        w_t = (1-\eta) w_{t-1} - \eta u_t \ \text{(`constraint`)}

    with :math:`\alpha` = `momentum` (the new gradient's weight) and :math:`\rho` = `scale`.
    The norm (`norm_type`, a `LMONorm` or its name, with `norm_kwargs`): 'spectral' (a matrix
    of `shape[0]` rows: its Newton-Schulz polar factor times :math:`\sqrt{d_{out}/d_{in}}`, or
    :math:`\sqrt{d_{out}}` without `normalize`, at least 1 with `max_scale`), 'spectral_conv'
    (the same of a conv kernel `(out, in, *kernel)` flattened, times
    :math:`\sqrt{d_{out}/d_{in}} / \prod kernel`), 'sign' (:math:`\operatorname{sign}(d) / d_{in}`),
    'bias' (:math:`d / \mathrm{RMS}` over the first axis), 'col' and 'row' (each column's or row's
    scaled norm), 'none' (:math:`d` itself) and 'auto' (the default: 'bias' for a leaf of rank
    <= 1, 'spectral' for a matrix, 'spectral_conv' for rank 3 or 4). These are the numbers of
    pytorch-optimizer's `SCION` (`gradtx.get("SCION", ...)` takes its arguments): its
    parameter groups, one norm and scale each, are `gradtx.partition` of several `scion`. Without
    `constraint`, pytorch-optimizer's weight decay: decoupled (:math:`w \leftarrow w(1-\eta\lambda)`)
    or, with `weight_decouple=False`, added to the gradient. The reference iterates Newton-Schulz
    in bfloat16; gradtx in the parameters' dtype (its tests compare with the reference's
    iteration in float32). A row-sparse gradient is densified.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      momentum: :math:`\alpha`, the new gradient's weight in the average, in (0, 1].
      scale: :math:`\rho`, the radius of the norm ball, > 0.
      weight_decay: :math:`\lambda`, >= 0 (unused with `constraint`).
      constraint: the conditional-gradient step :math:`(1-\eta) w - \eta u`.
      norm_type: the norm: a `LMONorm`, its value or its name ('auto', 'spectral',
        'spectral_conv', 'sign', 'bias', 'col', 'row', 'none').
      norm_kwargs: the norm's options: 'spectral' `max_scale`, `normalize`, `num_steps`;
        'spectral_conv' `num_steps`; 'sign' `normalize` (and `zero_init`, for initialisation
        only); 'col' and 'row' `normalized`, `transpose`.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      mu_dtype: dtype of the average `d` (default: each param's dtype).

    Returns:
      A `LeafWise` chain; its slot is `d`.

    Raises:
      ValueError: for `momentum` outside (0, 1], a non-positive `scale`, a negative decay, an
        unknown norm or option; (when traced) a leaf whose rank the norm does not take.
      TypeError: for non-bool flags or options.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scion(0.1, momentum=1.0)
        >>> params = {"w": jnp.zeros((2, 2)), "b": jnp.zeros(2)}
        >>> grads = {"w": jnp.array([[2.0, 0.0], [0.0, 0.5]]), "b": jnp.array([1.0, -2.0])}
        >>> u, _ = tx.update(grads, tx.init(params), params)
        >>> [round(float(x), 3) for x in u["b"]]  # the bias norm: -lr g / RMS(g)
        [-0.063, 0.126]

    References:
      Pethick et al., *Training deep learning models with norm-constrained LMOs*, ICML 2025
      (arXiv:2502.07529); pytorch-optimizer's `SCION` (the reference of the tests).
    """
    return _scion(
        "scion",
        learning_rate,
        momentum,
        scale,
        weight_decay,
        constraint,
        norm_type,
        norm_kwargs,
        weight_decouple,
        mu_dtype,
        light=False,
    )


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.SCIONLight", _REFERENCE_ARGUMENTS, defaults={"lr": 1e-3}, fixed={"maximize": False}
    )
)
def scion_light(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule = 0.1,
    scale: _protocol.ScalarOrSchedule = 1.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    constraint: bool = False,
    norm_type: Any = LMONorm.AUTO,
    norm_kwargs: Mapping[str, Any] | None = None,
    weight_decouple: bool = True,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""SCION-light: `scion` with the gradients summed into a decaying buffer instead of averaged.

    .. math::
        d_t = (1-\alpha) d_{t-1} + g_t, \qquad u_t = \rho\, \operatorname{lmo}(d_t)

    and the step of `scion` (its norms, `constraint`, weight decay). pytorch-optimizer's
    `SCIONLight` keeps :math:`d` in the parameters' gradient buffers, which the user does not
    zero (`backward` adds :math:`g_t`, `step` multiplies by :math:`1-\alpha`); gradtx keeps it as
    a slot, fed the gradients of each step: the same numbers (`gradtx.get("SCIONLight", ...)`
    takes its arguments). With `weight_decouple=False` the decay term :math:`\lambda w` enters
    the buffer, as it does there. At `momentum=1` the buffer is this step's gradient (the
    reference skips its scaling then, leaving the buffer to the user's `zero_grad`).

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      momentum: :math:`\alpha`, one minus the buffer's decay, in (0, 1].
      scale: :math:`\rho`, the radius of the norm ball, > 0.
      weight_decay: :math:`\lambda`, >= 0 (unused with `constraint`).
      constraint: the conditional-gradient step :math:`(1-\eta) w - \eta u`.
      norm_type: the norm, as `scion`'s.
      norm_kwargs: the norm's options, as `scion`'s.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      mu_dtype: dtype of the buffer `d` (default: each param's dtype).

    Returns:
      A `LeafWise` chain; its slot is `d`.

    Raises:
      ValueError: as `scion`.
      TypeError: as `scion`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scion_light(0.1, momentum=0.5, norm_type="none")
        >>> params = jnp.zeros(2)
        >>> state = tx.init(params)
        >>> for _ in range(2):
        ...     u, state = tx.update(jnp.ones(2), state, params)
        >>> u  # -lr (g + 0.5 g)
        Array([-0.15, -0.15], dtype=float32)

    References:
      Pethick et al., *Training deep learning models with norm-constrained LMOs*, ICML 2025
      (arXiv:2502.07529); pytorch-optimizer's `SCIONLight` (the reference of the tests).
    """
    return _scion(
        "scion_light",
        learning_rate,
        momentum,
        scale,
        weight_decay,
        constraint,
        norm_type,
        norm_kwargs,
        weight_decouple,
        mu_dtype,
        light=True,
    )


__all__ = ["LMONorm", "scion", "scion_light"]
