"""APOLLO: Adam's scaling measured on a random low-rank projection of the gradient; pytorch-optimizer's
`APOLLO` (`scale_by_apollo`, `apollo`)."""

from __future__ import annotations

import functools
import math
import zlib
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import update_rule

SCALE_TYPES = ("tensor", "channel")
"""How APOLLO measures Adam's scaling on the projection: one factor per leaf, or one per channel."""

PROJECTION_TYPES = ("std", "random")
"""The reference's projections this reproduces (with random matrices both project the longer side)."""

_TINY = 1e-8
"""Added to the norms APOLLO divides by (the reference's)."""


class ScaleByApolloState(NamedTuple):
    """State of `scale_by_apollo` (pytorch-optimizer's names); a leaf that is not projected keeps its Adam
    moments shaped like it and placeholders `zeros((1,))` in `projection` and `scaling_grad`."""

    count: _protocol.Count  # int32: completed updates
    exp_avg: _protocol.Updates  # Adam's first moment, of the projection (r, n) or (m, r) (starts at 0)
    exp_avg_sq: _protocol.Updates  # its second moment (starts at 0)
    projection: _protocol.Updates  # the random matrix (r, n) or (m, r), drawn at step 1 and each gap
    scaling_grad: _protocol.Updates  # the norm of the last scaled projection, shape () (the limiter's)


# low-rank moments, projections and placeholders: not compared with the params' shapes
setattr(ScaleByApolloState, "slots_shaped_like_params", False)  # noqa: B010  (not a field)


def _projected(shape: tuple[int, ...], rank: int | None) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """`(projection shape, low-rank shape)` of a matrix of `shape` (m, n): `(r, n)` and `(m, r)` if
    m >= n, else `(m, r)` and `(r, n)`; None for a leaf that is not projected (not 2-D, or no `rank`)."""
    if rank is None or len(shape) != 2:
        return None
    m, n = shape
    return ((rank, n), (m, rank)) if m >= n else ((m, rank), (rank, n))


def _slot(p, field: str, rank: int | None, path: Any = None) -> jax.Array:
    del path  # whole leaves only (`LeafWise`)
    shapes = _projected(tuple(jnp.shape(p)), rank)
    if shapes is None:
        return (
            _placement.filled(p, 0.0) if field.startswith("exp_avg") else _placement.reduced(p, ()).reshape(1)
        )
    if field == "scaling_grad":
        return _placement.reduced(p, ())
    return _placement.replicated_on(p, shapes[0] if field == "projection" else shapes[1])


def _default_draw(seed: int) -> Callable[..., jax.Array]:
    """The standard normal matrix APOLLO draws for the leaf at `path` at step `t`: from
    `jax.random.key(seed)` folded with the CRC-32 of the key path (31 bits), then with `t`."""

    def draw(path: Any, t: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
        key = jax.random.fold_in(
            jax.random.key(seed), zlib.crc32(jax.tree_util.keystr(path).encode()) & 0x7FFFFFFF
        )
        return jax.random.normal(jax.random.fold_in(key, t), shape, dtype)

    return draw


def _apollo_direction(g, m, v, proj, last, h, *, rank, scale, scale_type, draw, gap, path=None):
    """APOLLO's direction for one leaf: Adam on its projection, turned into one scaling factor (or one
    per channel) of the projected gradient, limited in growth and projected back; Adam itself for a leaf
    that is not projected; times the bias correction `h.step_scale`."""
    shapes = _projected(g.shape, rank)
    r = g
    if shapes is not None:
        renew = (h.t == 1) | (h.t % gap == 0)
        proj = jnp.where(renew, draw(path, h.t, shapes[0], g.dtype) / math.sqrt(rank), proj)
        whole = _placement.whole(g)
        r = whole @ proj.T if g.shape[0] >= g.shape[1] else proj.T @ whole
    m = _formulas.moment_increment(m, r, h.b1)  # torch's lerp
    v = h.b2 * v + (1 - h.b2) * r * r
    u = m / (jnp.sqrt(v) + h.eps)
    if shapes is not None:
        axis = None if scale_type == "tensor" else (0 if u.shape[0] < u.shape[1] else 1)
        norms = functools.partial(jnp.linalg.norm, axis=axis, keepdims=axis is not None)
        s = r * (norms(u) / (norms(r) + _TINY))
        norm = jnp.linalg.norm(s)
        limiter = jnp.where(h.t > 1, jnp.maximum(norm / (last + _TINY), 1.01) / 1.01, 1.0)
        s, last = s / limiter * math.sqrt(scale), norm / limiter
        u = _placement.placed_like((s @ proj if s.shape[1] == proj.shape[0] else proj @ s) * scale, g)
    return u * h.step_scale, m, v, proj, last


def _apollo_leaf(g, m, v, proj, last, w, h, *, decouple, fixed, **blocks):
    """One APOLLO step with pytorch-optimizer's rate and weight decay: L2 on the gradient, or the decay
    applied to the parameter after the step, by the bias-corrected rate (or by `weight_decay` alone)."""
    if not decouple:
        g = g + h.weight_decay * w
    u, m, v, proj, last = _apollo_direction(g, m, v, proj, last, h, **blocks)
    step = -h.learning_rate * u
    if decouple:
        rate = h.weight_decay if fixed else h.weight_decay * h.learning_rate * h.step_scale
        step = step - rate * (w + step)
    return step, m, v, proj, last


def _prepare(h, state, extra_args, *, correct_bias):
    """The bias corrections and the factor `sqrt(1 - b2^t) / (1 - b1^t)` of the step (1 without)."""
    if not correct_bias:
        return {"step_scale": 1.0}
    bc = _formulas.torch_corrections(h, state, extra_args)
    return {**bc, "step_scale": jnp.sqrt(bc["bc2"]) / bc["bc1"]}


def _rule(fn, leaf, hyper, rank, correct_bias, reads_params):
    return update_rule(
        fn,
        ScaleByApolloState,
        leaf,
        hyper=hyper,
        slots={f: functools.partial(_slot, field=f, rank=rank) for f in ScaleByApolloState._fields[1:]},
        prepare=functools.partial(_prepare, correct_bias=correct_bias),
        reads_params=reads_params,
        kind=_protocol.LeafWise,
        paths=True,
        real_only="pytorch-optimizer's APOLLO projects real matrices",
    )


def _check(fn, b1, b2, eps, rank, update_proj_gap, scale, scale_type, projection_type, correct_bias, draw):
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    if rank is not None:
        _checks.check_int(fn, "rank", rank, minimum=1)
    _checks.check_int(fn, "update_proj_gap", update_proj_gap, minimum=1)
    _checks.check_number(fn, "scale", scale)
    _checks.check_finite(fn, "scale", scale)
    _checks.check_nonnegative(fn, "scale", scale)
    _checks.check_one_of(fn, "scale_type", scale_type, SCALE_TYPES)
    _checks.check_one_of(fn, "projection_type", projection_type, PROJECTION_TYPES)
    _checks.check_bool(fn, "correct_bias", correct_bias)
    if draw is not None:
        _checks.check_callable(fn, "draw", draw)


@_registry.transform()
def scale_by_apollo(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    *,
    rank: int | None = None,
    update_proj_gap: int = 200,
    scale: float = 1.0,
    scale_type: str = "tensor",
    projection_type: str = "std",
    correct_bias: bool = True,
    seed: int = 0,
    draw: Callable[..., jax.Array] | None = None,
) -> _protocol.GradientTransformation:
    r"""APOLLO's direction: the gradient's random projection, scaled as Adam would scale it, projected back.

    For a matrix :math:`G \in \mathbb{R}^{m \times n}` (with `rank` :math:`r`) and a random
    :math:`P` with entries :math:`\mathcal{N}(0, 1/r)`, drawn at the first step and every
    `update_proj_gap` steps, of shape :math:`r \times n` (:math:`m \ge n`; :math:`R = G P^\top`) or
    :math:`m \times r` (:math:`R = P^\top G`):

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) R_t, \quad v_t = \beta_2 v_{t-1} + (1-\beta_2) R_t^2, \quad
        N_t = \frac{m_t}{\sqrt{v_t} + \epsilon},

        S_t = R_t \frac{\|N_t\|}{\|R_t\| + 10^{-8}}, \quad
        S_t \leftarrow S_t / \frac{\max(\|S_t\| / (\|S_{t-1}\| + 10^{-8}),\, 1.01)}{1.01}, \quad
        u_t = \frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\, s^{3/2} \operatorname{back}(S_t)

    with `back` the projection back (:math:`S P` or :math:`P S`) and the norms per channel (the shorter
    side of :math:`R`) with `scale_type="channel"`. These are pytorch-optimizer's numbers: the paper
    (Algorithm 1) scales the full gradient :math:`G` by the factors measured on :math:`R`; the reference
    scales :math:`R` and projects it back (a rank-:math:`r` step, times `scale` twice: :math:`\sqrt s`
    then :math:`s`), and so does this. A leaf that is not projected (not 2-D, or `rank` None, the
    reference's default) takes Adam's step :math:`m_t / (\sqrt{v_t} + \epsilon)`, bias-corrected as
    above (:math:`\epsilon` not corrected). A row-sparse gradient is densified.

    Args:
      b1, b2: decays of the moments, in [0, 1).
      eps: :math:`\epsilon`, >= 0.
      rank: :math:`r` (an int >= 1; not capped), or None: no projection.
      update_proj_gap: the steps between draws of :math:`P`, >= 1.
      scale: :math:`s`, >= 0.
      scale_type: `"tensor"` or `"channel"`.
      projection_type: `"std"` or `"random"` (the same, with random matrices).
      correct_bias: multiply by :math:`\sqrt{1-\beta_2^t} / (1-\beta_1^t)`.
      seed: the seed of the default draw.
      draw: `draw(path, t, shape, dtype)`, the standard normal matrix drawn for the leaf at key path
        `path` at step `t` (1-based); default: a normal draw from `jax.random.key(seed)`
        folded with the CRC-32 of the path, then with `t`. The reference draws with torch's
        generator: its tests replay its draws through this.

    Returns:
      A `LeafWise` transform with state `ScaleByApolloState`.

    Raises:
      ValueError: for an argument out of its range or an unknown option.
      TypeError: for a non-int `rank`, `update_proj_gap` or `seed`, a non-callable `draw`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_apollo(rank=1)
        >>> g = {"w": jnp.ones((3, 2)), "b": jnp.array([3.0, -4.0])}
        >>> u, state = tx.update(g, tx.init(g))
        >>> state.projection["w"].shape, state.exp_avg["w"].shape, [round(float(x), 3) for x in u["b"]]
        ((1, 2), (3, 1), [1.0, -1.0])

    References:
      Zhu et al., *APOLLO: SGD-like memory, AdamW-level performance*, MLSys 2025 (arXiv:2412.05270);
      pytorch-optimizer's `APOLLO` (the reference of the tests).
    """
    fn = "scale_by_apollo"
    _check(fn, b1, b2, eps, rank, update_proj_gap, scale, scale_type, projection_type, correct_bias, draw)
    _checks.check_int(fn, "seed", seed, minimum=0)
    blocks = {"rank": rank, "scale": scale, "scale_type": scale_type, "gap": update_proj_gap}
    leaf = functools.partial(_apollo_direction, draw=draw or _default_draw(seed), **blocks)
    return _rule(fn, leaf, {"b1": b1, "b2": b2, "eps": eps}, rank, correct_bias, False)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.APOLLO",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "scale_type": "scale_type",
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "fixed_decay": "fixed_decay",
            "correct_bias": "correct_bias",
            "eps": "eps",
            "rank": "rank",
            "update_proj_gap": "update_proj_gap",
            "scale": "scale",
            "projection_type": "projection_type",
        },
        defaults={"lr": 1e-2, "betas": (0.9, 0.999)},
        fixed={"maximize": False},
    )
)
def apollo(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    *,
    scale_type: str = "tensor",
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    weight_decouple: bool = True,
    fixed_decay: bool = False,
    correct_bias: bool = True,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    rank: int | None = None,
    update_proj_gap: int = 200,
    scale: float = 1.0,
    projection_type: str = "std",
    seed: int = 0,
    draw: Callable[..., jax.Array] | None = None,
) -> _protocol.GradientTransformation:
    r"""APOLLO: `scale_by_apollo`'s step with pytorch-optimizer's rate and weight decay; its `APOLLO`.

    .. math::
        w_t = \big(w_{t-1} - \eta\, u_t\big)\big(1 - \eta_t \lambda\big), \qquad
        \eta_t = \eta \sqrt{1-\beta_2^t} / (1-\beta_1^t)

    with :math:`u_t` of `scale_by_apollo` before its bias correction. The reference decays the
    parameter after the step, by its bias-corrected rate :math:`\eta_t` (`fixed_decay`: by
    :math:`\lambda`); `weight_decouple=False` adds :math:`\lambda w` to the gradient first. Its
    projection's arguments `rank`, `update_proj_gap`, `scale` and `projection_type` are those of its
    parameter groups (`APOLLO(params, rank=...)` puts them on every group, and every 2-D parameter is
    projected); `gradtx.get("APOLLO", lr=..., rank=...)` takes them under the same names.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      b1, b2, eps, rank, update_proj_gap, scale, scale_type, projection_type, correct_bias, seed: as
        `scale_by_apollo`'s.
      weight_decay: :math:`\lambda`, >= 0.
      weight_decouple: decay the parameter after the step (True) or add the decay to the gradient.
      fixed_decay: with `weight_decouple`, decay by :math:`\lambda` instead of :math:`\eta_t\lambda`.
      draw: `draw(path, t, shape, dtype)`, the standard normal matrix drawn for the leaf at key path
        `path` at step `t` (1-based); default: a normal draw from `jax.random.key(seed)`
        folded with the CRC-32 of the path, then with `t`. The reference draws with torch's
        generator: its tests replay its draws through this.

    Returns:
      A `LeafWise` transform with state `ScaleByApolloState`.

    Raises:
      ValueError: for an argument out of its range or an unknown option.
      TypeError: for a non-int `rank`, `update_proj_gap` or `seed`, a non-callable `draw`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.apollo(0.1)
        >>> params = jnp.zeros(2)
        >>> [round(float(x), 3) for x in tx.update(jnp.array([3.0, -4.0]), tx.init(params), params)[0]]
        [-0.1, 0.1]

    References:
      Zhu et al., *APOLLO: SGD-like memory, AdamW-level performance*, MLSys 2025 (arXiv:2412.05270);
      pytorch-optimizer's `APOLLO` (the reference of the tests).
    """
    fn = "apollo"
    _check(fn, b1, b2, eps, rank, update_proj_gap, scale, scale_type, projection_type, correct_bias, draw)
    _checks.check_int(fn, "seed", seed, minimum=0)
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_bool(fn, "weight_decouple", weight_decouple)
    _checks.check_bool(fn, "fixed_decay", fixed_decay)
    blocks = {"rank": rank, "scale": scale, "scale_type": scale_type, "gap": update_proj_gap}
    leaf = functools.partial(
        _apollo_leaf, decouple=weight_decouple, fixed=fixed_decay, draw=draw or _default_draw(seed), **blocks
    )
    hyper = {"b1": b1, "b2": b2, "eps": eps, "learning_rate": learning_rate, "weight_decay": weight_decay}
    return _rule(fn, leaf, hyper, rank, correct_bias, True)


__all__ = ["ScaleByApolloState", "apollo", "scale_by_apollo"]
