"""CAME: Adafactor's factored moments with a confidence-weighted momentum; pytorch-optimizer's `CAME`."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core.rule import update_rule
from gradtx.combinators._weight_decay import torch_weight_decay


class ScaleByCameState(NamedTuple):
    """State of `scale_by_came` (pytorch-optimizer's names); a leaf of one axis keeps `exp_avg_sq` and
    placeholders `zeros((1,))` in the factored fields, a leaf of more the factored ones and a placeholder
    in `exp_avg_sq`."""

    count: _protocol.Count  # int32: completed updates
    exp_avg: _protocol.Updates  # the momentum of the clipped update (starts at 0)
    exp_avg_sq_row: _protocol.Updates  # mean of g^2 + eps1 over the last axis (starts at 0)
    exp_avg_sq_col: _protocol.Updates  # mean of g^2 + eps1 over the second last axis (starts at 0)
    exp_avg_res_row: _protocol.Updates  # mean of the instability (u - m)^2 + eps2 over the last axis
    exp_avg_res_col: _protocol.Updates  # ... over the second last axis (starts at 0)
    exp_avg_sq: _protocol.Updates  # leaves of one axis: the second moment of g^2 + eps1 (starts at 0)
    exp_avg_sq_hat: _protocol.Updates  # ams_bound: the running maximum of the denominator, else None


# row/column statistics and placeholders: not compared with the params' shapes (`_tree_checks.check_shapes`)
setattr(ScaleByCameState, "slots_shaped_like_params", False)  # noqa: B010  (not a field)

_FIELDS = ("exp_avg_sq_row", "exp_avg_sq_col", "exp_avg_res_row", "exp_avg_res_col", "exp_avg_sq")


def _stat(p, field: str, path: Any = ()) -> jax.Array:
    """The slot `field` of the parameter `p`: rows (all axes but the last), columns (all but the second
    last) or the full second moment, as the leaf is factored (two axes or more) or not; else a placeholder.
    For ZeRO's slice of a leaf, the whole leaf's rows and columns."""
    shape = _sliced.whole_shape(path, p)
    n = len(shape)
    if (n >= 2) == (field == "exp_avg_sq"):
        return _placement.reduced(p, ()).reshape(1)
    if field == "exp_avg_sq":
        return _placement.filled(p, 0.0)
    keep = tuple(range(n - 1)) if field.endswith("row") else (*range(n - 2), n - 1)
    if shape != tuple(jnp.shape(p)):  # a slice: the whole leaf's statistics, on its devices
        return _placement.replicated_on(p, tuple(shape[i] for i in keep))
    return _placement.reduced(p, keep)


def factored_rsqrt(row: jax.Array, col: jax.Array) -> jax.Array:
    """Adafactor's factored inverse root `(row / mean(row))^(-1/2) col^(-1/2)`, the row statistic over the
    last axis and the column statistic over the second last (pytorch-optimizer's `approximate_sq_grad`)."""
    r = jax.lax.rsqrt(row / jnp.mean(row, axis=-1, keepdims=True))[..., None]
    return r * jax.lax.rsqrt(col)[..., None, :]


def _came_leaf(g, m, sq_row, sq_col, res_row, res_col, sq, sq_hat, h, *, path, ams_bound):
    """One CAME step of a leaf; the update is `m` times the factored inverse root of the instability. On
    ZeRO's slice of a leaf, the statistics and the update's RMS are the whole leaf's (`_sliced`)."""
    factored = len(_sliced.whole_shape(path, g)) >= 2
    g2 = g * g + h.eps1
    if factored:
        mean_last, mean_second_last = _sliced.leaf_means(path, g2, (-1, -2))
        sq_row = _formulas.moment_blend(sq_row, mean_last, h.b2)
        sq_col = _formulas.moment_blend(sq_col, mean_second_last, h.b2)
        u = _sliced.leaf_part(path, g, lambda shape: factored_rsqrt(sq_row, sq_col))
    else:
        sq = _formulas.moment_blend(sq, g2, h.b2)
        u = jax.lax.rsqrt(sq)
    if ams_bound:
        sq_hat = jnp.maximum(sq_hat, 1 / u)
        u = jax.lax.rsqrt(sq_hat / h.b2)
    u = u * g
    (mean_square,) = _sliced.leaf_means(path, u * u, (None,))
    u = u / jnp.maximum(jnp.sqrt(mean_square) / h.clip_threshold, 1.0)
    m = _formulas.moment_increment(m, u, h.b1)  # torch's lerp
    if factored:
        res = (u - m) ** 2 + h.eps2
        mean_last, mean_second_last = _sliced.leaf_means(path, res, (-1, -2))
        res_row = _formulas.moment_blend(res_row, mean_last, h.b3)
        res_col = _formulas.moment_blend(res_col, mean_second_last, h.b3)
        u = _sliced.leaf_part(path, g, lambda shape: factored_rsqrt(res_row, res_col)) * m
    else:
        u = m
    return _placement.placed_like(u, g), m, sq_row, sq_col, res_row, res_col, sq, sq_hat


@_registry.transform()
def scale_by_came(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule = 0.9999,
    *,
    clip_threshold: _protocol.ScalarOrSchedule = 1.0,
    ams_bound: bool = False,
    eps1: _protocol.ScalarOrSchedule = 1e-30,
    eps2: _protocol.ScalarOrSchedule = 1e-16,
) -> _protocol.GradientTransformation:
    r"""CAME's direction: Adafactor's clipped update, its momentum, scaled by the inverse root of a factored
    moment of their difference (the confidence).

    .. math::
        V_t = \operatorname{factored}_{\beta_2}(g_t^2 + \epsilon_1), \quad
        u_t = \frac{g_t / \sqrt{V_t}}{\max(1, \operatorname{rms}(g_t / \sqrt{V_t}) / d)}, \quad
        m_t = \beta_1 m_{t-1} + (1-\beta_1) u_t,

        S_t = \operatorname{factored}_{\beta_3}\big((u_t - m_t)^2 + \epsilon_2\big), \qquad
        \text{update} = m_t / \sqrt{S_t}

    where :math:`\operatorname{factored}_\beta(X)` keeps moving averages :math:`R` of the means of
    :math:`X` over the last axis and :math:`C` over the second last, and stands for
    :math:`R C / \operatorname{mean}(R)` (Adafactor's; a leaf of more than two axes is a stack of
    matrices over its leading axes). A leaf of one axis keeps the full :math:`V_t` and its update is
    :math:`m_t` (no confidence term), as the reference does; there is no bias correction. `ams_bound`
    (the reference's) keeps the running maximum :math:`\hat V_t` of :math:`\sqrt{V_t}` and uses
    :math:`(\hat V_t / \beta_2)^{-1/2}` in place of :math:`V_t^{-1/2}`. A row-sparse gradient is
    densified.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: decay of the instability moment, in [0, 1).
      clip_threshold: :math:`d`, the largest RMS of the update before the momentum, > 0.
      ams_bound: use the reference's running maximum (see above).
      eps1: added to :math:`g^2`, >= 0.
      eps2: added to the instability, >= 0.

    Returns:
      A `SliceWise` transform with state `ScaleByCameState` (`parallel.sharded_state` runs it on ZeRO's
      slices: one all-reduce of the row and column sums and the update's sum of squares per leaf).

    Raises:
      ValueError: for a beta outside [0, 1), a non-positive `clip_threshold` or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_came()
        >>> u, state = tx.update(jnp.array([3.0, -4.0]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 4) for x in u]  # 0.1 of sign(g) (the step of rms 1)
        [0.1, -0.1]

    References:
      Luo et al., *CAME: Confidence-guided adaptive memory efficient optimization*, ACL 2023
      (arXiv:2307.02047); pytorch-optimizer's `CAME` (the reference of the tests).
    """
    fn = "scale_by_came"
    _check(fn, b1, b2, b3, clip_threshold, ams_bound, eps1, eps2)
    return update_rule(
        fn,
        ScaleByCameState,
        functools.partial(_came_leaf, ams_bound=ams_bound),
        hyper={"b1": b1, "b2": b2, "b3": b3, "eps1": eps1, "eps2": eps2, "clip_threshold": clip_threshold},
        slots={
            "exp_avg": 0.0,
            **{f: functools.partial(_stat, field=f) for f in _FIELDS},
            "exp_avg_sq_hat": 0.0 if ams_bound else None,
        },
        kind=_protocol.SliceWise,  # the statistics and the RMS are the whole leaf's on ZeRO's slices too
        paths=True,
        real_only="pytorch-optimizer's CAME refuses complex parameters",
    )


def _check(fn, b1, b2, b3, clip_threshold, ams_bound, eps1, eps2):
    for name, beta in (("b1", b1), ("b2", b2), ("b3", b3)):
        _checks.check_in_range(fn, name, beta, 0.0, 1.0, high_open=True)
    _checks.check_positive(fn, "clip_threshold", clip_threshold)
    _checks.check_bool(fn, "ams_bound", ams_bound)
    _checks.check_nonnegative(fn, "eps1", eps1)
    _checks.check_nonnegative(fn, "eps2", eps2)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.CAME",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2", "b3"),
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "fixed_decay": "fixed_decay",
            "clip_threshold": "clip_threshold",
            "ams_bound": "ams_bound",
            "eps1": "eps1",
            "eps2": "eps2",
        },
        defaults={"lr": 2e-4, "betas": (0.9, 0.999, 0.9999)},
        fixed={"maximize": False},
    )
)
def came(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule = 0.9999,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    weight_decouple: bool = True,
    fixed_decay: bool = False,
    clip_threshold: _protocol.ScalarOrSchedule = 1.0,
    ams_bound: bool = False,
    eps1: _protocol.ScalarOrSchedule = 1e-30,
    eps2: _protocol.ScalarOrSchedule = 1e-16,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""CAME: `scale_by_came` with pytorch-optimizer's weight decay and the rate; its `CAME`.

    .. math::
        w_t = w_{t-1} (1 - \eta\lambda) - \eta\, m_t / \sqrt{S_t}

    (`scale_by_came`; `gradtx.get("CAME", lr=..., betas=(b1, b2, b3))` takes the reference's arguments).
    The decay is decoupled and scaled by the rate by default; `fixed_decay` drops the rate from it and
    `weight_decouple=False` adds :math:`\lambda w` to the gradient first (`torch_weight_decay`). The
    paper's Algorithm 1 is the factored case; the reference's leaves of one axis step by the momentum
    alone, and so does this.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      b1, b2, b3: decays of the momentum, the second moment and the instability, in [0, 1).
      weight_decay: :math:`\lambda`, >= 0.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      fixed_decay: with `weight_decouple`, decay by :math:`\lambda` instead of :math:`\eta\lambda`.
      clip_threshold: the largest RMS of the update before the momentum, > 0.
      ams_bound: the reference's running maximum of the second moment.
      eps1, eps2: added to :math:`g^2` and to the instability, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      A `SliceWise` chain; its slots are `scale_by_came`'s.

    Raises:
      ValueError: for an argument out of its range.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.came(0.1)
        >>> params = jnp.zeros((2, 2))
        >>> u, _ = tx.update(jnp.array([[1.0, -2.0], [3.0, 4.0]]), tx.init(params), params)
        >>> u.shape
        (2, 2)

    References:
      Luo et al., *CAME: Confidence-guided adaptive memory efficient optimization*, ACL 2023
      (arXiv:2307.02047); pytorch-optimizer's `CAME` (the reference of the tests).
    """
    fn = "came"
    _check(fn, b1, b2, b3, clip_threshold, ams_bound, eps1, eps2)
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    return torch_weight_decay(
        scale_by_came(b1, b2, b3, clip_threshold=clip_threshold, ams_bound=ams_bound, eps1=eps1, eps2=eps2),
        learning_rate,
        weight_decay,
        decouple=weight_decouple,
        fixed=fixed_decay,
        mask=mask,
    )


__all__ = ["ScaleByCameState", "came", "scale_by_came"]
