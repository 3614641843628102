"""Block scalings: `clip_by_block_rms`, `scale_by_param_block_rms` and `scale_by_param_block_norm` (each leaf
as one
block: its RMS, or its parameter's RMS or norm; Adafactor's clipping and parameter scaling)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core.rule import update_rule


def _param_norm_leaf(u: jax.Array, w: jax.Array, h) -> tuple[jax.Array]:
    """`u * max(min_scale, ||w||)`: the norm of the whole leaf (Frobenius for a matrix)."""
    norm = _formulas.leaf_norm(w).astype(_formulas.real_dtype(w.dtype))
    return (u * jnp.where(norm <= h.min_scale, h.min_scale, norm).astype(u.dtype),)


@_registry.transform()
def scale_by_param_block_norm(
    min_scale: _protocol.ScalarOrSchedule = 1e-3,
) -> _protocol.GradientTransformation:
    r"""Multiply each leaf of the updates by the L2 norm of its parameter (at least `min_scale`).

    .. math:: u \leftarrow u \cdot \max\big(\epsilon_2, \lVert w \rVert_2\big)

    the norm taken over the whole leaf (a vector's, a matrix's Frobenius norm), so that a
    learning rate is relative to the size of each parameter block; beside
    `scale_by_param_block_rms`, which uses the root mean square. These are the numbers of
    `optax.scale_by_param_block_norm`. A per-tensor rule: on packed parameters it sees
    per-leaf views; on ZeRO's slices (`parallel.sharded_state` in `shard_map`) the norm is the
    whole leaf's (one scalar all-reduce per leaf). A row-sparse update is densified first.

    Args:
      min_scale: :math:`\epsilon_2`, the smallest factor (parameters at or near zero), > 0.

    Returns:
      A `SliceWise` transform; state `EmptyState()`, or `BlockRmsState(count)` for a schedule.

    Raises:
      ValueError: for a non-positive or non-finite `min_scale`; at update time, if `params`
        is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_param_block_norm()
        >>> params = jnp.array([3.0, -4.0])  # norm 5
        >>> tx.update(jnp.array([1.0, 0.5]), tx.init(params), params)[0]
        Array([5. , 2.5], dtype=float32)

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*,
      ICML 2018 (section 8, relative step size; here with the norm).
    """
    fn = "scale_by_param_block_norm"
    _checks.check_finite(fn, "min_scale", min_scale)
    _checks.check_positive(fn, "min_scale", min_scale)
    return update_rule(
        fn,
        BlockRmsState,
        _param_norm_leaf,
        hyper={"min_scale": min_scale},
        reads_params=True,
        kind=_protocol.SliceWise,  # the norm is the whole leaf's, on ZeRO's slices too (`leaf_norm`)
        count="if_scheduled",
    )


class BlockRmsState(NamedTuple):
    """State of `clip_by_block_rms` / `scale_by_param_block_rms` when their argument is a schedule."""

    count: _protocol.Count  # int32: completed updates


def _rms(x: jax.Array, path: Any) -> jax.Array:
    """`sqrt(mean(|x|^2))` of the whole leaf at `path` in its (real) dtype, as optax computes it (a 16-bit
    float's squares summed in float32; NaN for an empty leaf); on ZeRO's slices too (`_sliced`)."""
    (mean_square,) = _sliced.leaf_means(path, _formulas.abs_sq(x), (None,))
    return jnp.sqrt(mean_square)


def _clip_leaf(u, h, *, path):
    """`u / max(1, RMS(u) / d)`, in that order (optax's and Adafactor's rounding)."""
    return (u / jnp.maximum(1, _rms(u, path) / h.threshold).astype(u.dtype),)


def _param_scale_leaf(u, w, h, *, path):
    """`u * max(min_scale, RMS(w))`."""
    rms = _rms(w, path)
    return (u * jnp.where(rms <= h.min_scale, h.min_scale, rms).astype(u.dtype),)


@_registry.transform()
def clip_by_block_rms(threshold: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""Scale each leaf of the updates down so that its root mean square is at most `threshold`.

    Adafactor's update clipping, per tensor:

    .. math:: u \leftarrow \frac{u}{\max\big(1, \mathrm{RMS}(u) / d\big)}, \qquad
        \mathrm{RMS}(u) = \sqrt{\mathrm{mean}(u^2)}

    (`optax.clip_by_block_rms`). The RMS is the whole leaf's, on ZeRO's slices too
    (`parallel.sharded_state` in `shard_map`: one scalar all-reduce per leaf). A row-sparse
    update is densified first.

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
        kind=_protocol.SliceWise,  # the whole leaf's RMS on ZeRO's slices too (`_rms`)
        count="if_scheduled",
        paths=True,
    )


@_registry.transform()
def scale_by_param_block_rms(
    min_scale: _protocol.ScalarOrSchedule = 1e-3,
) -> _protocol.GradientTransformation:
    r"""Multiply each leaf of the updates by its parameter's root mean square (Adafactor's relative step).

    .. math:: u \leftarrow u \cdot \max\big(\epsilon_2, \mathrm{RMS}(w)\big)

    so that a learning rate is relative to the scale of each parameter
    (`optax.scale_by_param_block_rms`). The RMS is the whole leaf's, on ZeRO's slices too
    (`parallel.sharded_state` in `shard_map`). A row-sparse update is densified first.

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
        kind=_protocol.SliceWise,  # the whole leaf's RMS on ZeRO's slices too (`_rms`)
        count="if_scheduled",
        paths=True,
    )
