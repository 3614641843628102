"""SOAP (Vyas et al. 2024): Adam in the eigenbasis of Shampoo's preconditioner: `scale_by_soap`, `soap`.

A leaf's layout, its eigenbasis and the `gg` and `q` slots are in `soap_basis.py`.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.soap_basis import (
    _Config,
    _from_layout,
    _Layout,
    _layout,
    _lerp,
    _new_basis,
    _outer,
    _project,
    _statistics,
    _to_layout,
)
from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import formulas as _formulas
from gradtx._core import matrix_work as _matrix_work
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.matrix_work import MatrixWork
from gradtx._core.rule import first_step, update_rule
from gradtx._core.scalars import at_least_float32

_DATA_FORMATS = ("channels_first", "channels_last")


class ScaleBySoapState(NamedTuple):
    """State of `scale_by_soap`: pytorch-optimizer's `SOAP` state, per leaf.

    `gg` and `q` hold a tuple with one entry per (merged) dimension: a [d, d] array where the dimension
    is preconditioned, else None. They are float32 (float64 for float64 leaves), whatever the leaf's dtype.
    """

    count: _protocol.Count  # int32: completed updates; the reference's `group['step']`
    exp_avg: _protocol.Updates  # the first moment, in the parameter's own basis
    exp_avg_sq: _protocol.Updates  # the second moment, in the eigenbasis `q`
    gg: _protocol.Updates  # `GG`: the averaged outer products of the gradient, per dimension
    q: _protocol.Updates  # `Q`: their eigenvectors (eigh first, then power iteration and QR)


def _soap_step(parts, b1, b2, eps, factor, shampoo_beta, first, renew, *, config: _Config, layout: _Layout):
    """One leaf's work: `(direction, exp_avg, exp_avg_sq, gg, q)` (the matrices of its preconditioned
    dimensions only; the first three as one array) from `parts`, the leaf's gradient and moments (one
    array: they move as one), statistics and basis in the compute dtype; the direction is 0 at the first
    step (`first`). The basis is renewed when `renew`."""
    (x, m, v), *mats = parts
    k = sum(layout.preconditioned)
    stats_in, basis_in = iter(mats[:k]), iter(mats[k:])
    stats = tuple(next(stats_in) if on else None for on in layout.preconditioned)
    basis = tuple(next(basis_in) if on else None for on in layout.preconditioned)
    v = _to_layout(v, layout)

    # Adam in the eigenbasis of the last step's statistics: the second moment of the rotated gradient,
    # the first moment kept in the parameter's basis and rotated when used
    x_l = _to_layout(x, layout)
    new_m = _lerp(m, x, 1 - b1)
    rotated = _project(x_l, basis)
    new_v = _lerp(v, rotated * rotated, 1 - b2)
    scaled = _project(_to_layout(new_m, layout), basis) / (jnp.sqrt(new_v) + eps)
    direction = _project(scaled, basis, backward=True)
    if config.normalize_gradient:
        direction = direction / (jnp.sqrt(jnp.mean(direction * direction)) + eps)
    direction = jnp.where(first, 0, factor * direction)
    new_m, new_v = jnp.where(first, m, new_m), jnp.where(first, v, new_v)

    # then the statistics, and the basis: eigh at the first step, a power iteration every frequency steps;
    # the second moment's entries follow the columns of a refreshed basis
    new_stats = tuple(
        None if s is None else _lerp(s, _outer(x_l, i), 1 - shampoo_beta) for i, s in enumerate(stats)
    )

    def renewed(new_v):
        new_basis = list(basis)
        for i, (s, o) in enumerate(zip(new_stats, basis, strict=True)):
            if s is not None and o is not None:
                new_basis[i], order = _new_basis(s, o, first)
                new_v = jnp.take(new_v, order, axis=i)
        return tuple(new_basis), new_v

    new_basis, new_v = _control.cond(renew, renewed, lambda v: (basis, v), new_v)
    kept = [a for a in (*new_stats, *new_basis) if a is not None]
    return jnp.stack([_from_layout(direction, layout), new_m, _from_layout(new_v, layout)]), *kept


def _soap_leaf(g, exp_avg, exp_avg_sq, gg, q, h, *, config: _Config):
    """One leaf's step: `(direction, exp_avg, exp_avg_sq, gg, q)`; the direction is 0 at the first step.

    A preconditioned (or reshaped) leaf's whole step is its matrix work (`_soap_step`: whole under
    Explicit axes, or one device's share of the leaves under `gradtx.parallel.split_matrix_work`); one
    that is neither (Adam's rule) is stepped where it is, sharded."""
    if g.size == 0:
        return jnp.zeros(g.shape, g.dtype), exp_avg, exp_avg_sq, gg, q
    layout = _layout(g.shape, config)
    dt = at_least_float32(g.dtype)
    args = (h.b1, h.b2, h.eps, h.factor, h.shampoo_beta, h.first, h.renew)
    mats = [a for a in (*gg, *q) if a is not None]
    parts = (jnp.stack([g.astype(dt), exp_avg.astype(dt), exp_avg_sq.astype(dt)]), *mats)
    step = functools.partial(_soap_step, config=config, layout=layout)
    if not any(layout.preconditioned) and layout.dims == layout.shape:
        results = step(parts, *args)
    else:
        stacked = yield MatrixWork(step, _matrix_work.one(parts), ("soap", config), args=args)
        results = _matrix_work.only(stacked)
    (direction, new_m, new_v), *new_mats = results
    new_mats.reverse()

    def back(new, old):
        return None if old is None else _placement.placed_like(new.astype(old.dtype), old)

    return (
        _placement.placed_like(direction.astype(g.dtype), g),
        back(new_m, exp_avg),
        back(new_v, exp_avg_sq),
        tuple(back(None if s is None else new_mats.pop(), s) for s in gg),
        tuple(back(None if o is None else new_mats.pop(), o) for o in q),
    )


def _prepare(h, state, extra_args, *, correct_bias: bool, frequency: int):
    """The step's factor: Adam's `sqrt(1 - b2^s) / (1 - b1^s)` after `s = count` moment updates (or 1);
    whether it is the first step (which only builds the preconditioner) and whether it renews the basis."""
    del state, extra_args
    first = h.count == 0
    flags = {"first": first, "renew": first | (h.count % frequency == 0)}  # else the basis is kept
    if not correct_bias:
        return {"factor": 1.0, **flags}
    s = jnp.maximum(h.count, 1)  # the first step takes no step
    return {"factor": jnp.sqrt(_formulas.correction(h.b2, s)) / _formulas.correction(h.b1, s), **flags}


def _config(fn: str, b1: Any, b2: Any, shampoo_beta: Any, eps: Any, options: dict[str, Any]) -> _Config:
    """The static options (`_Config`'s fields) as a `_Config`, every argument checked under `fn`'s name."""
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0)
    if shampoo_beta is not None:
        _checks.check_in_range(fn, "shampoo_beta", shampoo_beta, 0.0, 1.0)
    _checks.check_nonnegative(fn, "eps", eps)
    for name in ("precondition_frequency", "max_precondition_dim"):
        _checks.check_int(fn, name, options[name], minimum=1)
    for name in ("merge_dims", "precondition_1d", "correct_bias", "normalize_gradient"):
        _checks.check_bool(fn, name, options[name])
    _checks.check_one_of(fn, "data_format", options["data_format"], _DATA_FORMATS)
    return _Config(**options)


def _soap_rule(b1: Any, b2: Any, shampoo_beta: Any, eps: Any, config: _Config) -> Any:
    """`scale_by_soap`'s rule, its arguments checked."""
    return update_rule(
        "scale_by_soap",
        ScaleBySoapState,
        functools.partial(_soap_leaf, config=config),
        hyper={"b1": b1, "b2": b2, "shampoo_beta": b2 if shampoo_beta is None else shampoo_beta, "eps": eps},
        slots={
            "exp_avg": 0.0,
            "exp_avg_sq": 0.0,
            "gg": functools.partial(_statistics, config=config, fill=lambda d, dt: jnp.zeros((d, d), dt)),
            "q": functools.partial(_statistics, config=config, fill=lambda d, dt: jnp.eye(d, dtype=dt)),
        },
        prepare=functools.partial(
            _prepare, correct_bias=config.correct_bias, frequency=config.precondition_frequency
        ),
        kind=_protocol.LeafWise,  # per-dimension statistics of whole leaves
        real_only="its preconditioners are real symmetric matrices",
        compute_dtype=at_least_float32,
    )


@_registry.transform()
def scale_by_soap(
    b1: _protocol.ScalarOrSchedule = 0.95,
    b2: _protocol.ScalarOrSchedule = 0.95,
    *,
    shampoo_beta: _protocol.ScalarOrSchedule | None = None,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    precondition_frequency: int = 10,
    max_precondition_dim: int = 10000,
    merge_dims: bool = False,
    precondition_1d: bool = False,
    correct_bias: bool = True,
    normalize_gradient: bool = False,
    data_format: str = "channels_first",
) -> _protocol.GradientTransformation:
    r"""SOAP's direction: Adam in the eigenbasis of Shampoo's preconditioner, as pytorch-optimizer has it.

    Per leaf, seen as a tensor with dimensions :math:`i` (its own, or merged, see below), at step
    :math:`t` with :math:`s = t - 1`:

    .. math::
        \tilde g = g \times_0 Q_0 \times_1 Q_1 \cdots, \qquad
        m \leftarrow \beta_1 m + (1-\beta_1) g, \qquad
        v \leftarrow \beta_2 v + (1-\beta_2) \tilde g^2

        u = \frac{\sqrt{1-\beta_2^s}}{1-\beta_1^s}\;
            \Big(\frac{m \times_0 Q_0 \times_1 Q_1 \cdots}{\sqrt v + \epsilon}\Big)
            \times_0 Q_0^T \times_1 Q_1^T \cdots

        G_i \leftarrow \beta_s G_i + (1-\beta_s)\, g_{(i)} g_{(i)}^T, \qquad
        Q_i \leftarrow \operatorname{qr}(G_i Q_i P_i), \ v \leftarrow v P \quad \text{when } s \bmod f = 0

    where :math:`\times_i Q` contracts dimension i with the first index of :math:`Q`, :math:`g_{(i)}`
    is :math:`g` unfolded along i, :math:`\beta_s` is `shampoo_beta` (`b2` when None), :math:`f` is
    `precondition_frequency` and :math:`P_i` sorts the columns by decreasing
    :math:`\operatorname{diag}(Q_i^T G_i Q_i)` (and :math:`v` along i alike). The first step only sets
    :math:`G_i` and :math:`Q_i` (its eigenvectors, by decreasing eigenvalue) and returns 0.
    `normalize_gradient` divides :math:`u` by :math:`\operatorname{rms}(u) + \epsilon`; `correct_bias=False`
    drops the factor. Dimensions above `max_precondition_dim` keep the identity; a vector is
    preconditioned only with `precondition_1d`, a scalar never (Adam). `merge_dims` first merges
    neighbouring dimensions while their product stays within `max_precondition_dim` (a 4-D
    `channels_last` leaf read as NCHW); a shape merged whole is one dimension (the reference fails there).

    As pytorch-optimizer's `SOAP` and the paper's code, :math:`m` stays in the parameter's basis (heavyball's
    SOAP keeps it in the eigenbasis, rotated at each refresh; its defaults refresh every 2 steps and merge
    dimensions up to 2048), and the basis is refreshed by a power iteration and a QR. Within a repeated
    eigenvalue (the null space of a rank-deficient first statistic) the basis is the eigensolver's choice,
    here as in the reference, and the steps depend on it. The arithmetic runs in float32 (float64 for
    float64 leaves); row-sparse gradients are densified.

    Args:
      b1, b2: decays of the first and second moments, in [0, 1].
      shampoo_beta: decay of the statistics :math:`G_i`, in [0, 1]; None: `b2`.
      eps: added to :math:`\sqrt v` (and to the rms with `normalize_gradient`), >= 0.
      precondition_frequency: steps between refreshes of the eigenbasis (int >= 1).
      max_precondition_dim: larger dimensions are not preconditioned (int >= 1).
      merge_dims: merge small neighbouring dimensions first.
      precondition_1d: precondition vectors too.
      correct_bias: Adam's bias correction.
      normalize_gradient: divide the direction by its rms.
      data_format: `"channels_first"` or `"channels_last"`: how a 4-D leaf is merged.

    Returns:
      A `LeafWise` transform with state `ScaleBySoapState(count, exp_avg, exp_avg_sq, gg, q)`.

    Raises:
      TypeError: for a non-integer frequency or size, a non-bool flag.
      ValueError: for a decay outside [0, 1], a negative `eps`, a frequency or size < 1, an unknown
        `data_format`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_soap(b1=0.0, b2=0.0)
        >>> g = jnp.array([[3.0, 0.0], [0.0, -4.0]])
        >>> state = tx.init(g)
        >>> u, state = tx.update(g, state)  # the first step sets the eigenbasis
        >>> u, state = tx.update(g, state)  # then Adam in it: the sign of the rotated g, rotated back
        >>> u.round(4)
        Array([[ 1.,  0.],
               [ 0., -1.]], dtype=float32)

    References:
      Vyas, Morwani, Zhao, Shapira, Brandfonbrener, Janson, Kakade, *SOAP: improving and stabilizing
      Shampoo using Adam*, ICLR 2025, arXiv:2409.11321 (https://github.com/nikhilvyas/SOAP);
      pytorch-optimizer's `SOAP` (the reference of the tests); heavyball's `SOAP`.
    """
    options = {k: v for k, v in locals().items() if k in _Config._fields}
    return _soap_rule(b1, b2, shampoo_beta, eps, _config("scale_by_soap", b1, b2, shampoo_beta, eps, options))


class _TorchStepState(NamedTuple):
    """State of `soap`'s step."""

    count: _protocol.Count  # int32: completed updates


def _torch_step_leaf(u, w, h):
    """`w <- (w - lr u)(1 - lr wd)`: the step, then the decay of the stepped weights; nothing at step 1."""
    decay = h.learning_rate * h.weight_decay
    step = -h.learning_rate * (1 - decay) * u - decay * w.astype(u.dtype)
    return (jnp.where(h.first, 0, step).astype(u.dtype),)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.SOAP",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            **{a: a for a in ("shampoo_beta", "weight_decay", "eps", *_Config._fields)},
        },
        defaults={"lr": 3e-3, "betas": (0.95, 0.95)},
        fixed={"maximize": False},
    )
)
def soap(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.95,
    b2: _protocol.ScalarOrSchedule = 0.95,
    *,
    shampoo_beta: _protocol.ScalarOrSchedule | None = None,
    weight_decay: _protocol.ScalarOrSchedule = 1e-2,
    precondition_frequency: int = 10,
    max_precondition_dim: int = 10000,
    merge_dims: bool = False,
    precondition_1d: bool = False,
    correct_bias: bool = True,
    normalize_gradient: bool = False,
    data_format: str = "channels_first",
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""SOAP: Adam in the eigenbasis of Shampoo's preconditioner, with pytorch-optimizer's weight decay.

    .. math::
        w \leftarrow (w - \eta\, u_t)(1 - \eta\lambda)

    with :math:`u_t` the direction of `scale_by_soap` (the math, the merging of dimensions, the
    refreshes of the eigenbasis). The first step only builds the preconditioner: the weights neither
    move nor decay. These are the numbers of pytorch-optimizer's `SOAP`, whose arguments and defaults
    `gradtx.get("SOAP", lr=..., betas=...)` takes; its decay scales the stepped weights
    (:math:`\eta^2\lambda u_t` more than AdamW's :math:`\eta(u_t + \lambda w)`), as the paper's
    code does. Row-sparse gradients are densified.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule; the reference's default is 3e-3).
      b1, b2: decays of the first and second moments, in [0, 1].
      shampoo_beta: decay of the statistics, in [0, 1]; None: `b2`.
      weight_decay: :math:`\lambda`, >= 0.
      precondition_frequency, max_precondition_dim, merge_dims, precondition_1d: as for `scale_by_soap`.
      correct_bias, normalize_gradient, data_format: as for `scale_by_soap`.
      eps: added to :math:`\sqrt v`, >= 0.

    Returns:
      A chain whose first state is `ScaleBySoapState(count, exp_avg, exp_avg_sq, gg, q)`.

    Raises:
      TypeError: for a non-integer frequency or size, a non-bool flag.
      ValueError: for a decay outside [0, 1], a negative rate, weight decay or `eps`, a frequency or
        size < 1, an unknown `data_format`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.soap(0.1, b1=0.0, b2=0.0, weight_decay=0.0)
        >>> w, g = jnp.ones((2, 2)), jnp.array([[3.0, 0.0], [0.0, -4.0]])
        >>> state = tx.init(w)
        >>> u, state = tx.update(g, state, w)  # the first step builds the preconditioner
        >>> u, state = tx.update(g, state, w)
        >>> bool(jnp.allclose(u, -0.1 * jnp.sign(g), atol=1e-6))  # -lr times the direction
        True

    References:
      Vyas et al., *SOAP: improving and stabilizing Shampoo using Adam*, ICLR 2025, arXiv:2409.11321;
      pytorch-optimizer's `SOAP` (the reference of the tests).
    """
    options = {k: v for k, v in locals().items() if k in _Config._fields}
    config = _config("soap", b1, b2, shampoo_beta, eps, options)
    _checks.check_learning_rate("soap", learning_rate)
    _checks.check_nonnegative("soap", "weight_decay", weight_decay)
    step = update_rule(
        "soap",
        _TorchStepState,
        _torch_step_leaf,
        hyper={"learning_rate": learning_rate, "weight_decay": weight_decay},
        reads_params=True,
        prepare=first_step,
    )
    return chain(_soap_rule(b1, b2, shampoo_beta, eps, config), step)


__all__ = ["ScaleBySoapState", "scale_by_soap", "soap"]
