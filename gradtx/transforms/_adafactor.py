"""Adafactor's building blocks: `scale_by_factored_rms`, `clip_by_block_rms`, `scale_by_param_block_rms`.

The factored second moment keeps, for a matrix, one statistic per row and one per column
instead of one per element; the update clipping and the relative step size (the
parameter's RMS) are per-tensor rules of their own. All three look at whole leaves, so
on packed parameters they get per-leaf views (`gradtx.packing.leaf_wise`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core.rule import update_rule


class ScaleByFactoredRmsState(NamedTuple):
    """State of `scale_by_factored_rms`: per leaf, either the factored statistics or the full one.

    A leaf that is factored keeps `v_row` and `v_col` and a placeholder `zeros((1,))` in `v`;
    a leaf that is not keeps `v` (shaped like it) and placeholders in the other two (optax's
    layout, so its checkpoints load).
    """

    count: _protocol.Count  # int32: completed updates
    v_row: _protocol.Updates  # factored leaves: mean of g^2 over the largest axis (starts at 0)
    v_col: _protocol.Updates  # factored leaves: mean of g^2 over the second largest axis (starts at 0)
    v: _protocol.Updates  # other leaves: the element-wise second moment (starts at 0)


# placeholders and row/column statistics: not compared with the params' shapes (`_tree_checks.check_shapes`)
setattr(ScaleByFactoredRmsState, "slots_shaped_like_params", False)  # noqa: B010  (not a field)


def factored_dims(
    shape: tuple[int, ...], factored: bool, min_dim_size_to_factor: int
) -> tuple[int, int] | None:
    """`(d1, d0)`: the second largest and the largest axis of `shape`, or None when not factored.

    A leaf is factored when `factored` is set, it has two or more axes, and its second
    largest axis has at least `min_dim_size_to_factor` entries (ties: the later axis is larger).
    """
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape, kind="stable")
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


def _decay_rate_pow(count: jax.Array, exponent: Any) -> jax.Array:
    """Adafactor's second-moment decay `1 - t^(-exponent)`, `t = count + 1` (float32)."""
    t = jnp.asarray(count + 1, jnp.float32)
    return 1.0 - t ** (-exponent)


def _factored_stat(p, which: int, *, factored: bool, min_dim_size_to_factor: int) -> jax.Array:
    """Slot `which` of `(v_row, v_col, v)` for the parameter `p`: a factored leaf has its row and column
    statistics, any other leaf its full `v`; an unused slot is `zeros((1,))` (optax's placeholder)."""
    shape = tuple(jnp.shape(p))
    dims = factored_dims(shape, factored, min_dim_size_to_factor)
    if dims is None:
        return _placement.filled(p, 0.0) if which == 2 else _placement.reduced(p, ()).reshape(1)
    if which == 2:
        return _placement.reduced(p, ()).reshape(1)
    axis = dims[1] if which == 0 else dims[0]  # v_row averages over the largest axis, v_col the second
    return _placement.reduced(p, tuple(i for i in range(len(shape)) if i != axis))


def _decay(h, state, extra_args, *, schedule: Callable[..., Any], step_offset: int) -> dict[str, Any]:
    """`beta2` of this step (a `prepare`): `schedule(count - step_offset, decay_rate)`."""
    del state, extra_args
    return {"b2": schedule(h.count - step_offset, h.decay_rate)}


def _factored_leaf(g, v_row, v_col, v, h, *, factored: bool, min_dim_size_to_factor: int):
    """One leaf of `scale_by_factored_rms`: `(update, v_row, v_col, v)`."""
    g2 = g * g + h.eps
    dims = factored_dims(g.shape, factored, min_dim_size_to_factor)
    if dims is None:
        v = _formulas.moment_blend(v, g2, h.b2).astype(v.dtype)
        return g * v**-0.5, v_row, v_col, v
    d1, d0 = dims
    v_row = _formulas.moment_blend(v_row, jnp.mean(g2, axis=d0), h.b2).astype(v_row.dtype)
    v_col = _formulas.moment_blend(v_col, jnp.mean(g2, axis=d1), h.b2).astype(v_col.dtype)
    row_mean = jnp.mean(v_row, axis=d1 - 1 if d1 > d0 else d1, keepdims=True)
    row_factor = (v_row / row_mean) ** -0.5
    col_factor = v_col**-0.5
    update = g * jnp.expand_dims(row_factor, axis=d0) * jnp.expand_dims(col_factor, axis=d1)
    return update, v_row, v_col, v


@_factory.api
def scale_by_factored_rms(
    factored: bool = True,
    decay_rate: _protocol.ScalarOrSchedule = 0.8,
    step_offset: int = 0,
    min_dim_size_to_factor: int = 128,
    eps: _protocol.ScalarOrSchedule = 1e-30,
    *,
    decay_rate_fn: Callable[[jax.Array, Any], Any] | None = None,
) -> _protocol.GradientTransformation:
    r"""Divide the updates by a factored estimate of their root mean square (Adafactor's scaling).

    For a leaf whose two largest axes (rows :math:`i` along the second largest, columns
    :math:`j` along the largest) have at least `min_dim_size_to_factor` entries:

    .. math::
        \hat\beta_{2t} = 1 - t^{-c}, \qquad G_t = g_t^2 + \epsilon_1, \\
        R_t = \hat\beta_{2t} R_{t-1} + (1 - \hat\beta_{2t})\,\mathrm{mean}_j\, G_t, \qquad
        C_t = \hat\beta_{2t} C_{t-1} + (1 - \hat\beta_{2t})\,\mathrm{mean}_i\, G_t, \\
        u_t = g_t \Big/ \sqrt{\frac{R_t\, C_t}{\mathrm{mean}_i R_t}}

    (:math:`R` is `v_row`, one entry per index :math:`i` of the second largest axis;
    :math:`C` is `v_col`, one per index :math:`j` of the largest; the other axes of a leaf
    with more than two are kept.) Any other leaf keeps the full second
    moment :math:`V_t = \hat\beta_{2t} V_{t-1} + (1 - \hat\beta_{2t})\, G_t` (`v`) and gets
    :math:`u_t = g_t / \sqrt{V_t}`. :math:`t` is the step (`count + 1`) less `step_offset`,
    and :math:`c` is `decay_rate`; `decay_rate_fn(count - step_offset, decay_rate)` replaces
    the schedule :math:`\hat\beta_{2t}` (e.g. one capped at 0.999, Zhai et al.). These are
    the numbers of `optax.scale_by_factored_rms`.

    A row-sparse gradient is densified first (the statistics of every row and column move).

    Args:
      factored: factor the second moment of leaves with two or more axes.
      decay_rate: the exponent :math:`c` of the decay schedule, >= 0.
      step_offset: subtracted from the step (fine-tuning from a checkpoint), an int >= 0 (or a 0-d
        int array).
      min_dim_size_to_factor: factor a leaf only when its second largest axis is at least
        this long, an int >= 0.
      eps: :math:`\epsilon_1`, added to the squared gradient, > 0.
      decay_rate_fn: a function `(count - step_offset, decay_rate) -> beta2` replacing
        the default schedule, or None.

    Returns:
      A `GradientTransformation` with state `ScaleByFactoredRmsState(count, v_row, v_col, v)`.

    Raises:
      ValueError: for a negative `decay_rate` or `step_offset`, or a non-positive `eps`.
      TypeError: for a non-bool `factored`, non-int sizes, or a non-callable `decay_rate_fn`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_factored_rms(min_dim_size_to_factor=2)
        >>> state = tx.init(jnp.zeros((2, 3)))
        >>> state.v_row.shape, state.v_col.shape  # one statistic per row and one per column
        ((2,), (3,))
        >>> u, state = tx.update(jnp.ones((2, 3)), state)
        >>> [round(float(x), 4) for x in u[0]]  # the first step divides by |g|
        [1.0, 1.0, 1.0]

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*,
      ICML 2018 (Algorithms 4 and 5); Zhai et al., *Scaling vision transformers*, CVPR 2022.
    """
    fn = "scale_by_factored_rms"
    _checks.check_bool(fn, "factored", factored)
    _checks.check_finite(fn, "decay_rate", decay_rate)
    _checks.check_nonnegative(fn, "decay_rate", decay_rate)
    if not _is_int_array(step_offset):  # an int, or (injected by `inject_hyperparams`) a 0-d int array
        _checks.check_int(fn, "step_offset", step_offset, minimum=0)
    _checks.check_int(fn, "min_dim_size_to_factor", min_dim_size_to_factor, minimum=0)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_positive(fn, "eps", eps)
    if decay_rate_fn is not None:
        _checks.check_callable(fn, "decay_rate_fn", decay_rate_fn)
    return update_rule(
        fn,
        ScaleByFactoredRmsState,
        functools.partial(_factored_leaf, factored=factored, min_dim_size_to_factor=min_dim_size_to_factor),
        hyper={"decay_rate": decay_rate, "eps": eps},
        slots={
            field: functools.partial(
                _factored_stat, which=i, factored=factored, min_dim_size_to_factor=min_dim_size_to_factor
            )
            for i, field in enumerate(("v_row", "v_col", "v"))
        },
        prepare=functools.partial(_decay, schedule=decay_rate_fn or _decay_rate_pow, step_offset=step_offset),
        kind=_protocol.LeafWise,  # the statistics are means over whole axes
        real_only="its factored second moments are row and column means of real squares",
    )


def _is_int_array(value: Any) -> bool:
    """A 0-d integer array (a traced one included), as `inject_hyperparams` passes an int argument."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.integer) and getattr(value, "ndim", None) == 0


class BlockRmsState(NamedTuple):
    """State of `clip_by_block_rms` / `scale_by_param_block_rms` when their argument is a schedule."""

    count: _protocol.Count  # int32: completed updates


def _rms(x: jax.Array) -> jax.Array:
    """`sqrt(mean(x^2))` of one leaf, summed in at least float32 (NaN for an empty leaf)."""
    return jnp.sqrt(_formulas.squared_norm(x) / x.size)


def _clip_leaf(u, h):
    """`u / max(1, RMS(u) / d)`, in that order (optax's and Adafactor's rounding)."""
    return (u / jnp.maximum(1, _rms(u) / h.threshold).astype(u.dtype),)


def _param_scale_leaf(u, w, h):
    """`u * max(min_scale, RMS(w))`."""
    rms = _rms(w)
    return (u * jnp.where(rms <= h.min_scale, h.min_scale, rms).astype(u.dtype),)


@_factory.api
def clip_by_block_rms(threshold: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""Scale each leaf of the updates down so that its root mean square is at most `threshold`.

    Adafactor's update clipping, per tensor:

    .. math:: u \leftarrow \frac{u}{\max\big(1, \mathrm{RMS}(u) / d\big)}, \qquad
        \mathrm{RMS}(u) = \sqrt{\mathrm{mean}(u^2)}

    (`optax.clip_by_block_rms`). A row-sparse update is densified first.

    Args:
      threshold: :math:`d`, the largest RMS an update keeps, > 0.

    Returns:
      A `GradientTransformation`; state `EmptyState()`, or `BlockRmsState(count)` for a schedule.

    Raises:
      ValueError: for a non-positive or non-finite `threshold`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.clip_by_block_rms(1.0)
        >>> tx.update(jnp.array([3.0, 4.0, 0.0, 0.0]), tx.init(None))[0]  # RMS 2.5 -> 1
        Array([1.2, 1.6, 0. , 0. ], dtype=float32)

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*,
      ICML 2018 (section 6, update clipping).
    """
    fn = "clip_by_block_rms"
    _checks.check_finite(fn, "threshold", threshold)
    _checks.check_positive(fn, "threshold", threshold)

    return update_rule(
        fn,
        BlockRmsState,
        _clip_leaf,
        hyper={"threshold": threshold},
        kind=_protocol.LeafWise,
        count="if_scheduled",
    )


@_factory.api
def scale_by_param_block_rms(
    min_scale: _protocol.ScalarOrSchedule = 1e-3,
) -> _protocol.GradientTransformation:
    r"""Multiply each leaf of the updates by its parameter's root mean square (Adafactor's relative step).

    .. math:: u \leftarrow u \cdot \max\big(\epsilon_2, \mathrm{RMS}(w)\big)

    so that a learning rate is relative to the scale of each parameter
    (`optax.scale_by_param_block_rms`). A row-sparse update is densified first.

    Args:
      min_scale: :math:`\epsilon_2`, the smallest factor (parameters at or near zero), > 0.

    Returns:
      A `GradientTransformation`; state `EmptyState()`, or `BlockRmsState(count)` for a schedule.

    Raises:
      ValueError: for a non-positive or non-finite `min_scale`; at update time, if `params`
        is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_param_block_rms()
        >>> params = jnp.array([3.0, -4.0, 0.0, 0.0])  # RMS 2.5
        >>> tx.update(jnp.ones(4), tx.init(params), params)[0]
        Array([2.5, 2.5, 2.5, 2.5], dtype=float32)

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*,
      ICML 2018 (section 8, relative step size).
    """
    fn = "scale_by_param_block_rms"
    _checks.check_finite(fn, "min_scale", min_scale)
    _checks.check_positive(fn, "min_scale", min_scale)

    return update_rule(
        fn,
        BlockRmsState,
        _param_scale_leaf,
        hyper={"min_scale": min_scale},
        reads_params=True,
        kind=_protocol.LeafWise,
        count="if_scheduled",
    )
