"""Adafactor: factored second moments, block-RMS clipping and parameter scaling, `adafactor`."""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx._core.scalars import at_least_float32
from gradtx.combinators._block_scaling import clip_by_block_rms, scale_by_param_block_rms
from gradtx.combinators._ema import ema
from gradtx.combinators._scale import DESCEND, scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


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


def _factored_stat(
    p, which: int, *, factored: bool, min_dim_size_to_factor: int, path: Any = ()
) -> jax.Array:
    """Slot `which` of `(v_row, v_col, v)` for the parameter `p` (the leaf at `path`): a factored leaf has
    its row and column statistics, any other leaf its full `v`; an unused slot is `zeros((1,))` (optax's
    placeholder). For ZeRO's slice of a leaf, the whole leaf's statistics."""
    shape = _sliced.whole_shape(path, p)
    dims = factored_dims(shape, factored, min_dim_size_to_factor)
    if dims is None:
        return _placement.filled(p, 0.0) if which == 2 else _placement.reduced(p, ()).reshape(1)
    if which == 2:
        return _placement.reduced(p, ()).reshape(1)
    axis = dims[1] if which == 0 else dims[0]  # v_row averages over the largest axis, v_col the second
    kept = tuple(i for i in range(len(shape)) if i != axis)
    if shape != tuple(jnp.shape(p)):  # a slice: the statistics of the whole leaf, on its devices
        return _placement.replicated_on(p, tuple(shape[i] for i in kept))
    return _placement.reduced(p, kept)


def _decay(h, state, extra_args, *, schedule: Callable[..., Any], step_offset: int) -> dict[str, Any]:
    """`beta2` of this step (a `prepare`): `schedule(count - step_offset, decay_rate)`."""
    del state, extra_args
    return {"b2": schedule(h.count - step_offset, h.decay_rate)}


def _factored_leaf(g, v_row, v_col, v, h, *, path, factored: bool, min_dim_size_to_factor: int):
    """One leaf of `scale_by_factored_rms`: `(update, v_row, v_col, v)`; on ZeRO's slice of a leaf, the
    statistics are the whole leaf's (`_sliced`)."""
    g2 = g * g + h.eps
    dims = factored_dims(_sliced.whole_shape(path, g), factored, min_dim_size_to_factor)
    if dims is None:
        v = _formulas.moment_blend(v, g2, h.b2).astype(v.dtype)
        return g * v**-0.5, v_row, v_col, v
    d1, d0 = dims
    mean_over_cols, mean_over_rows = _sliced.leaf_means(path, g2, (d0, d1))
    v_row = _formulas.moment_blend(v_row, mean_over_cols, h.b2).astype(v_row.dtype)
    v_col = _formulas.moment_blend(v_col, mean_over_rows, h.b2).astype(v_col.dtype)
    row_mean = jnp.mean(v_row, axis=d1 - 1 if d1 > d0 else d1, keepdims=True)
    row_factor = (v_row / row_mean) ** -0.5
    col_factor = v_col**-0.5
    rows = _sliced.leaf_part(path, g, lambda shape: jnp.broadcast_to(jnp.expand_dims(row_factor, d0), shape))
    cols = _sliced.leaf_part(path, g, lambda shape: jnp.broadcast_to(jnp.expand_dims(col_factor, d1), shape))
    return g * rows * cols, v_row, v_col, v


@_registry.transform()
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

    A row-sparse gradient is densified first (the statistics of every row and column move). On ZeRO's
    slices (`parallel.sharded_state` inside `shard_map`) the statistics are the whole leaf's: each
    replica sums its slice's squares into rows and columns, and one all-reduce of those sums per leaf
    combines them.

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
        kind=_protocol.SliceWise,  # means over whole axes, on ZeRO's slices too (`_sliced.leaf_means`)
        paths=True,
        real_only="its factored second moments are row and column means of real squares",
        compute_dtype=at_least_float32,  # optax's float32 decay rate, for bfloat16 leaves too
    )


def _is_int_array(value: Any) -> bool:
    """A 0-d integer array (a traced one included), as `inject_hyperparams` passes an int argument."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.integer) and getattr(value, "ndim", None) == 0


@_registry.optimizer("Adafactor")
def adafactor(
    learning_rate: _protocol.ScalarOrSchedule | None = None,
    min_dim_size_to_factor: int = 128,
    decay_rate: _protocol.ScalarOrSchedule = 0.8,
    decay_offset: int = 0,
    clipping_threshold: _protocol.ScalarOrSchedule | None = 1.0,
    momentum: _protocol.ScalarOrSchedule | None = None,
    weight_decay: _protocol.ScalarOrSchedule | None = None,
    eps: _protocol.ScalarOrSchedule = 1e-30,
    *,
    multiply_by_parameter_scale: bool = True,
    factored: bool = True,
    mu_dtype: Any = jnp.float32,
    mask: Any = None,
    decay_rate_fn: Callable[[jax.Array, Any], Any] | None = None,
) -> _protocol.GradientTransformation:
    r"""Adafactor: factored second moments, update clipping and a step relative to each parameter's scale.

    The chain of `optax.adafactor`, with its defaults and numbers:
    `scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor, eps)`,
    then `clip_by_block_rms(clipping_threshold)` (unless None), the learning rate (unless
    None), `scale_by_param_block_rms()` (when `multiply_by_parameter_scale`: the paper's
    relative step), `ema(momentum, mu_dtype=mu_dtype)` (unless None), and
    `add_decayed_weights(weight_decay, mask=mask)` (unless None; not multiplied by the
    learning rate), and the descent. The paper's relative step size
    :math:`\rho_t = \min(10^{-2}, 1/\sqrt{t})` is
    `learning_rate=lambda count: jnp.minimum(1e-2, jax.lax.rsqrt(count + 1.0))`. Matrices
    whose two largest axes have at least `min_dim_size_to_factor` entries keep one
    statistic per row and per column; other leaves one per element. A row-sparse gradient
    is densified.

    Args:
      learning_rate: a factor on the step (number, scalar array or schedule), or None for none.
      min_dim_size_to_factor: factor a leaf only when its second largest axis is at least this long.
      decay_rate: the exponent :math:`c` of the second-moment decay :math:`1 - t^{-c}`, >= 0.
      decay_offset: subtracted from the step in that decay (fine-tuning), an int >= 0.
      clipping_threshold: the largest RMS of an update per leaf, > 0, or None for no clipping.
      momentum: the decay of an average of the updates, in [0, 1], or None for none.
      weight_decay: add `weight_decay * params` after the rate, >= 0, or None for none.
      eps: added to the squared gradient, > 0.
      multiply_by_parameter_scale: scale each leaf's step by its parameter's RMS (at least 1e-3).
      factored: factor the second moment of matrices.
      mu_dtype: dtype of the momentum (optax's `dtype_momentum`).
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      decay_rate_fn: `(count - decay_offset, decay_rate) -> beta2`, replacing the decay schedule.

    Returns:
      A `LeafWise` chain; the statistics are the slots `v_row`, `v_col` and `v`.

    Raises:
      ValueError: for a bad decay, threshold, momentum, weight decay or `eps`.
      TypeError: for non-int sizes or offsets, or non-bool flags.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adafactor(learning_rate=0.1, min_dim_size_to_factor=2)
        >>> params = {"w": jnp.ones((2, 3))}
        >>> u, state = tx.update({"w": jnp.full((2, 3), 0.5)}, tx.init(params), params)
        >>> u["w"][0]  # -lr * RMS(w) * g / |g|
        Array([-0.1, -0.1, -0.1], dtype=float32)

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*, ICML 2018.
    """
    fn = "adafactor"  # arguments named differently in the building blocks are checked under their names here
    _checks.check_bool(fn, "multiply_by_parameter_scale", multiply_by_parameter_scale)
    _checks.check_int(fn, "decay_offset", decay_offset, minimum=0)
    if clipping_threshold is not None:
        _checks.check_finite(fn, "clipping_threshold", clipping_threshold)
        _checks.check_positive(fn, "clipping_threshold", clipping_threshold)
    if momentum is not None:
        _checks.check_in_range(fn, "momentum", momentum, 0.0, 1.0)
    parts = [
        scale_by_factored_rms(
            factored, decay_rate, decay_offset, min_dim_size_to_factor, eps, decay_rate_fn=decay_rate_fn
        )
    ]
    if clipping_threshold is not None:
        parts.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        parts.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        parts.append(scale_by_param_block_rms())
    if momentum is not None:
        parts.append(ema(momentum, mu_dtype=mu_dtype))
    if weight_decay is not None:
        parts.append(add_decayed_weights(weight_decay, mask=mask))
    return chain(*parts, scale_by_learning_rate(DESCEND))


__all__ = ["ScaleByFactoredRmsState", "adafactor", "scale_by_factored_rms"]
