"""MARS: Adam or Lion on a variance-reduced gradient; pytorch-optimizer's `MARS` (`scale_by_mars`, `mars`)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._algorithms.cautious import cautious_mask
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._masking import partition
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import torch_weight_decay

MARS_TYPES = ("adamw", "lion")
"""The directions of `scale_by_mars` (pytorch-optimizer's `mars_type`; its `"shampoo"` is not reproduced)."""

EXP_AVG_SQ_EPS = 1e-15
"""Added to the second moment under the square root (pytorch-optimizer's `apply_ams_bound`)."""


class ScaleByMarsState(NamedTuple):
    """State of `scale_by_mars` (pytorch-optimizer's names)."""

    count: _protocol.Count  # int32: completed updates (the reference's `step`)
    exp_avg: _protocol.Updates  # the momentum of the corrected gradient (starts at 0)
    exp_avg_sq: _protocol.Updates  # its second moment (starts at 0); None for mars_type="lion"
    last_grad: _protocol.Updates  # the previous gradient (starts at 0); None without the correction
    max_exp_avg_sq: _protocol.Updates  # running maximum of exp_avg_sq (ams_bound), else None


def _mars_leaf(g, m, v, last, vmax, *w_h, path, mars_type, corrected, ams_bound, cautious, coupled=False):
    """One MARS step of a leaf: the clipped corrected gradient `c` (or `g` without the correction), its
    momentum, and Adam's bias-corrected step on it (or its sign). `coupled`: the reference's
    `weight_decouple=False`, whose decay reaches only the gradient it keeps for the next step."""
    w, h = w_h if coupled else (None, w_h[0])
    kept = g + h.weight_decay * w if coupled else g
    c = g
    if corrected:
        c = (g - last) * (h.gamma * (h.b1 / (1 - h.b1))) + g
        c = c / jnp.maximum(jnp.sqrt(_sliced.total(jnp.sum(c * c))), 1.0)  # the leaf's norm, on slices too
    m = _formulas.moment_increment(m, c, h.b1)  # torch's lerp
    u = cautious_mask(m, g, path) if cautious else m
    if corrected and mars_type == "lion":
        return jnp.sign(u), m, v, kept, vmax
    v = h.b2 * v + (1 - h.b2) * c * c
    if ams_bound:
        vmax = jnp.maximum(vmax, v)
    den = (jnp.sqrt((vmax if ams_bound else v) + EXP_AVG_SQ_EPS) + h.eps) / jnp.sqrt(h.bc2) * h.bc1
    return u / den, m, v, (kept if corrected else None), vmax


def _mars_rule(fn, b1, b2, gamma, eps, *, mars_type, corrected, ams_bound, cautious, coupled_decay=None):
    """The MARS rule (`corrected`) or the AdamW rule of its 1-D parameters, as `update_rule` builds it;
    `coupled_decay`: the weight decay of the reference's `weight_decouple=False` (see `_mars_leaf`)."""
    adam = not (corrected and mars_type == "lion")
    coupled = coupled_decay is not None
    return update_rule(
        fn,
        ScaleByMarsState,
        functools.partial(
            _mars_leaf,
            mars_type=mars_type,
            corrected=corrected,
            ams_bound=ams_bound,
            cautious=cautious,
            coupled=coupled,
        ),
        hyper={
            "b1": b1,
            "b2": b2,
            "gamma": gamma,
            "eps": eps,
            **({"weight_decay": coupled_decay} if coupled else {}),
        },
        reads_params=coupled,
        slots={
            "exp_avg": 0.0,
            "exp_avg_sq": 0.0 if adam else None,
            "last_grad": 0.0 if corrected else None,
            "max_exp_avg_sq": 0.0 if adam and ams_bound else None,
        },
        prepare=_formulas.torch_corrections,
        kind=_protocol.SliceWise if corrected or cautious else _protocol.ElementWise,  # per-leaf norm, count
        paths=True,
        real_only="pytorch-optimizer's MARS steps on real views",
    )


@_registry.transform()
def scale_by_mars(
    b1: _protocol.ScalarOrSchedule = 0.95,
    b2: _protocol.ScalarOrSchedule = 0.99,
    gamma: _protocol.ScalarOrSchedule = 0.025,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mars_type: str = "adamw",
    ams_bound: bool = False,
    cautious: bool = False,
) -> _protocol.GradientTransformation:
    r"""MARS's direction: Adam (or the sign) of a momentum of the variance-reduced, clipped gradient.

    .. math::
        c_t = g_t + \gamma \tfrac{\beta_1}{1-\beta_1} (g_t - g_{t-1}), \quad
        c_t \leftarrow c_t / \max(1, \|c_t\|), \quad
        m_t = \beta_1 m_{t-1} + (1-\beta_1) c_t, \quad v_t = \beta_2 v_{t-1} + (1-\beta_2) c_t^2,

        u_t = \frac{m_t}{1-\beta_1^t} \Big/ \frac{\sqrt{v_t + 10^{-15}} + \epsilon}{\sqrt{1-\beta_2^t}}
        \quad (\text{"adamw"}), \qquad u_t = \operatorname{sign}(m_t) \quad (\text{"lion"})

    with :math:`g_0 = 0`: the numbers of pytorch-optimizer's `MARS` on its parameters of two axes or more.
    The paper (Algorithm 1, MARS-AdamW) adds :math:`\epsilon` to :math:`\sqrt{\hat v_t}`; the reference
    adds it before the bias correction (and :math:`10^{-15}` under the root), which is what this does.
    `ams_bound` divides by the running maximum of :math:`v`; `cautious` zeroes the elements of the step
    whose sign differs from the gradient's and rescales the rest by :math:`n / (n_{\text{agree}} + 1)`.
    The norm is the leaf's: a row-sparse gradient is densified.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      gamma: :math:`\gamma`, the weight of the gradient correction, >= 0.
      eps: :math:`\epsilon`, >= 0.
      mars_type: `"adamw"` or `"lion"` (see above).
      ams_bound: divide by the running maximum of the second moment.
      cautious: mask the step where it disagrees with the gradient (see above).

    Returns:
      A `SliceWise` transform with state `ScaleByMarsState` (`ElementWise` without the correction and
      the cautious mask).

    Raises:
      ValueError: for a beta outside [0, 1), a negative `gamma` or `eps`, or an unknown `mars_type`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_mars(mars_type="lion")
        >>> u, state = tx.update(jnp.array([[3.0, -4.0]]), tx.init(jnp.zeros((1, 2))))
        >>> u, state.last_grad  # sign of the momentum of c = g / ||g||
        (Array([[ 1., -1.]], dtype=float32), Array([[ 3., -4.]], dtype=float32))

    References:
      Yuan et al., *MARS: Unleashing the power of variance reduction for training large models*, 2024
      (arXiv:2411.10438); pytorch-optimizer's `MARS` (the reference of the tests).
    """
    fn = "scale_by_mars"
    _check(fn, b1, b2, gamma, eps, mars_type, ams_bound, cautious)
    return _mars_rule(
        fn, b1, b2, gamma, eps, mars_type=mars_type, corrected=True, ams_bound=ams_bound, cautious=cautious
    )


def _check(fn, b1, b2, gamma, eps, mars_type, ams_bound, cautious, suffix=""):
    _checks.check_in_range(fn, f"b1{suffix}", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, f"b2{suffix}", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "gamma", gamma)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_one_of(fn, "mars_type", mars_type, MARS_TYPES)
    _checks.check_bool(fn, "ams_bound", ams_bound)
    _checks.check_bool(fn, "cautious", cautious)


def _mars_labels(params: Any) -> Any:
    """ "mars" for the parameters of two axes or more, "adamw" for the others (pytorch-optimizer's split)."""
    return jax.tree.map(lambda p: "mars" if jnp.ndim(p) >= 2 else "adamw", params)


_MARS_LABELS = _masks.ShapeLabels(_mars_labels)  # by the whole leaves' shapes, on ZeRO's slices too


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.MARS",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "gamma": "gamma",
            "mars_type": "mars_type",
            "optimize_1d": "optimize_1d",
            "lr_1d": "learning_rate_1d",
            "betas_1d": ("b1_1d", "b2_1d"),
            "weight_decay": "weight_decay",
            "weight_decay_1d": "weight_decay_1d",
            "weight_decouple": "weight_decouple",
            "fixed_decay": "fixed_decay",
            "ams_bound": "ams_bound",
            "cautious": "cautious",
            "eps": "eps",
        },
        defaults={"lr": 3e-3, "betas": (0.95, 0.99), "betas_1d": (0.9, 0.95)},
        fixed={"maximize": False},
    )
)
def mars(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.95,
    b2: _protocol.ScalarOrSchedule = 0.99,
    gamma: _protocol.ScalarOrSchedule = 0.025,
    *,
    mars_type: str = "adamw",
    optimize_1d: bool = False,
    learning_rate_1d: _protocol.ScalarOrSchedule = 3e-3,
    b1_1d: _protocol.ScalarOrSchedule = 0.9,
    b2_1d: _protocol.ScalarOrSchedule = 0.95,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    weight_decay_1d: _protocol.ScalarOrSchedule = 0.1,
    weight_decouple: bool = True,
    fixed_decay: bool = False,
    ams_bound: bool = False,
    cautious: bool = False,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""MARS: `scale_by_mars` on the matrices, AdamW on the rest; pytorch-optimizer's `MARS`.

    .. math::
        w_t = w_{t-1} (1 - \eta\lambda) - \eta\, u_t

    with :math:`u_t` of `scale_by_mars` for the parameters of two axes or more (all of them with
    `optimize_1d`), and for the others the same Adam step on the plain gradient (no correction, no
    clipping; no sign for `"lion"`) with `b1_1d`, `b2_1d`, the rate `learning_rate_1d` and the decay
    `weight_decay_1d` (`gradtx.get("MARS", lr=..., betas=...)` takes the reference's arguments). The
    decay is decoupled (`fixed_decay`: not scaled by the rate). The reference's `weight_decouple=False`
    adds :math:`\lambda w` to the gradient only after the step was computed: it reaches the previous
    gradient kept for the next correction, not the moments, and the 1-D parameters do not decay at all;
    this reproduces that (the paper decouples the decay). Its `lr_1d` is the rate of the 1-D parameters
    (the reference scales it with `lr` when `lr` changes, a schedule here is its own); its
    `mars_type="shampoo"` runs Newton-Schulz in bfloat16 and is not reproduced.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      b1, b2: decays of `scale_by_mars`'s moments, in [0, 1).
      gamma: the weight of the gradient correction, >= 0.
      mars_type: `"adamw"` or `"lion"`.
      optimize_1d: run `scale_by_mars` on every parameter, with `learning_rate` and `weight_decay`.
      learning_rate_1d: the rate of the other parameters, >= 0.
      b1_1d, b2_1d: the decays of their Adam step, in [0, 1).
      weight_decay: :math:`\lambda` of the MARS parameters, >= 0.
      weight_decay_1d: :math:`\lambda` of the others, >= 0.
      weight_decouple: decay the weights (True), or the reference's coupled decay (see above).
      fixed_decay: decay by :math:`\lambda` instead of :math:`\eta\lambda`.
      ams_bound: divide by the running maximum of the second moment.
      cautious: mask each step where it disagrees with the gradient.
      eps: added to the root of the second moment, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      A `SliceWise` transform (a partition "mars" / "adamw" unless `optimize_1d`; on ZeRO's slices each
      leaf's norm and the cautious mask's count are the whole leaf's).

    Raises:
      ValueError: for an argument out of its range, an unknown `mars_type`, or a `mask` with
        `weight_decouple=False`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.mars(0.1, weight_decay_1d=0.0)
        >>> params = {"w": jnp.zeros((2, 2)), "b": jnp.zeros(2)}
        >>> u, _ = tx.update({"w": jnp.ones((2, 2)), "b": jnp.ones(2)}, tx.init(params), params)
        >>> u["w"].round(3), u["b"].round(3)  # a first Adam step is -rate sign(g): lr, then lr_1d
        (Array([[-0.1, -0.1],
               [-0.1, -0.1]], dtype=float32), Array([-0.003, -0.003], dtype=float32))

    References:
      Yuan et al., *MARS: Unleashing the power of variance reduction for training large models*, 2024
      (arXiv:2411.10438); pytorch-optimizer's `MARS` (the reference of the tests).
    """
    fn = "mars"
    _check(fn, b1, b2, gamma, eps, mars_type, ams_bound, cautious)
    _checks.check_in_range(fn, "b1_1d", b1_1d, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2_1d", b2_1d, 0.0, 1.0, high_open=True)
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "learning_rate_1d", learning_rate_1d)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_nonnegative(fn, "weight_decay_1d", weight_decay_1d)
    _checks.check_bool(fn, "optimize_1d", optimize_1d)
    _checks.check_bool(fn, "weight_decouple", weight_decouple)
    _checks.check_bool(fn, "fixed_decay", fixed_decay)
    flags = {"mars_type": mars_type, "ams_bound": ams_bound, "cautious": cautious}
    if not weight_decouple:
        if mask is not None:
            raise ValueError(
                "`mars`: `mask` selects decoupled decay; with `weight_decouple=False` give None."
            )
        coupled = chain(
            _mars_rule(fn, b1, b2, gamma, eps, corrected=True, coupled_decay=weight_decay, **flags),
            scale_by_learning_rate(learning_rate),
        )
        if optimize_1d:
            return coupled
        plain = _mars_rule(fn, b1_1d, b2_1d, gamma, eps, corrected=False, **flags)
        return partition(
            {"mars": coupled, "adamw": chain(plain, scale_by_learning_rate(learning_rate_1d))}, _MARS_LABELS
        )
    matrices = torch_weight_decay(
        _mars_rule(fn, b1, b2, gamma, eps, corrected=True, **flags),
        learning_rate,
        weight_decay,
        fixed=fixed_decay,
        mask=mask,
    )
    if optimize_1d:
        return matrices
    rest = torch_weight_decay(
        _mars_rule(fn, b1_1d, b2_1d, gamma, eps, corrected=False, **flags),
        learning_rate_1d,
        weight_decay_1d,
        fixed=fixed_decay,
        mask=mask,
    )
    return partition({"mars": matrices, "adamw": rest}, _MARS_LABELS)


__all__ = ["ScaleByMarsState", "mars", "scale_by_mars"]
