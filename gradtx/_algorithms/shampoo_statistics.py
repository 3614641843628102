"""Shampoo's statistics, one per dimension of a leaf (tf.contrib's `ShampooOptimizer`): their slots (a
[d, d] matrix, or a diagonal past `max_matrix_size`, and the roots kept between renewals), contrib's weighted
average, and one dimension's renewal with its root applied. Functions of one leaf, called by `shampoo.py`'s
rule inside the leaf's matrix work."""

from __future__ import annotations

import functools
import numbers
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._algorithms import shampoo_roots as _roots_math
from gradtx._core import control as _control
from gradtx._core import matrix_work as _matrix_work
from gradtx._core import placement as _placement

_HIGHEST = jax.lax.Precision.HIGHEST  # full float32 products (TPUs, TF32 GPUs round inputs otherwise)


def _dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape) if len(shape) else (1,)  # contrib divides by the rank 0; gradtx: a scalar is a [1]


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _weighted_average(slot, decay, decay_t, rest):
    """contrib's `_weighted_average`: `(value, new_slot)`; a literal decay of 0 or 1 takes a short form.

    For a decay known only at run time (a schedule, an array, `inject_hyperparams`) contrib
    computes `slot + ((decay - 1) * slot + rest)`: `slot + rest` at decay 1, and within an
    ulp of `rest` at decay 0. gradtx selects `slot + rest` and `rest` exactly at those
    values, so a traced 0 or 1 gives the numbers of a literal one (XLA's fused multiply-adds
    would otherwise round the two forms differently); a traced decay does write the slot,
    as contrib's general form does.
    """
    if _is_number(decay) and decay == 0.0:
        return rest, slot  # the slot is not written
    rest = _placement.placed_like(rest, slot)  # Explicit axes: where the slot is (a whole `rest` is sliced)
    if _is_number(decay) and decay == 1.0:
        value = slot + rest
    else:
        general = slot + ((decay_t - 1) * slot + rest)
        value = jnp.where(decay_t == 1, slot + rest, jnp.where(decay_t == 0, rest, general))
    return value, value


class _Config(NamedTuple):
    """The static options of a `scale_by_shampoo` (and its hyperparameters, as given)."""

    fn: str
    max_matrix_size: int
    gbar_decay: Any  # as given: a literal 0 or 1 takes contrib's short forms
    mat_gbar_decay: Any  # (the same)
    precond_update_interval: int
    svd_interval: int
    use_iterative_root: bool
    alpha: Any  # as given: a literal's -alpha / rank is formed in double, as contrib does


class _Scalars(NamedTuple):
    """One step's scalars in a leaf's compute dtype, and whether statistics and roots are renewed: the
    arguments of a leaf's matrix work."""

    gbar_decay: jax.Array
    gbar_weight: jax.Array
    mat_gbar_decay: jax.Array
    mat_gbar_weight: jax.Array
    eps: jax.Array
    neg_alpha: jax.Array  # -alpha / rank
    update_stats: jax.Array  # t % precond_update_interval == 0
    update_roots: jax.Array  # t % svd_interval == 0


def _diagonal_dimension(pg, x, i, mat_g_i, scalars, config):
    """A dimension larger than `max_matrix_size`: a diagonal statistic, renewed every step (no factor k).

    Returns `(pg, new statistic)`; `pg` comes back with dimension i moved last.
    """
    axes = tuple(j for j in range(x.ndim) if j != i)
    rest = scalars.mat_gbar_weight * jnp.sum(x * x, axis=axes)
    # the statistic where `rest` is (whole in a leaf's matrix work, else sharded along i like its slot)
    statistic = _placement.placed_like(mat_g_i, rest)
    value, slot = _weighted_average(statistic, config.mat_gbar_decay, scalars.mat_gbar_decay, rest)
    pg = jnp.transpose(pg, (*range(1, x.ndim), 0)) * jnp.power(value + scalars.eps, scalars.neg_alpha)
    return pg, _placement.placed_like(slot, mat_g_i)


def _matrix_dimension(pg, x, i, statistic, kept, scalars, config):
    """A dimension with a full `d x d` statistic (in a leaf's matrix work: the leaf whole): renew it every
    k steps, its root every svd_interval (else `kept`, the last one).

    Returns `(pg, new statistic, new root slot)`; `pg` comes back with dimension i moved last.
    """
    axes = [j for j in range(x.ndim) if j != i]
    # = (weight * k) * tensordot(x, x); the scalar goes in first so that XLA's fused
    # multiply-adds round alike whether the weight is a literal 1 or a traced value
    scaled = (scalars.mat_gbar_weight * config.precond_update_interval) * x
    rest = jnp.tensordot(scaled, x, axes=(axes, axes), precision=_HIGHEST)
    value, slot = _weighted_average(statistic, config.mat_gbar_decay, scalars.mat_gbar_decay, rest)
    if config.precond_update_interval > 1:
        value = jnp.where(scalars.update_stats, value, statistic)
        slot = jnp.where(scalars.update_stats, slot, statistic)
    root = _roots_math.root(x.shape[i], x.ndim, config.use_iterative_root, config.alpha, config.fn)
    root = functools.partial(root, eps=scalars.eps, neg_alpha=scalars.neg_alpha)
    if config.svd_interval > 1:  # renewed every svd_interval steps, else kept
        h = _control.cond(scalars.update_roots, root, lambda _: kept, value)
    else:
        h = root(value)
    pg = jnp.tensordot(pg, h, axes=([0], [0]), precision=_HIGHEST)
    return pg, slot, h if config.svd_interval > 1 else kept


def _averaged(config: _Config) -> bool:
    """Whether the step writes `gbar`: unless `gbar_decay` is a literal 0 (contrib's short form)."""
    return not (_is_number(config.gbar_decay) and config.gbar_decay == 0.0)


def _work_key(config: _Config) -> tuple[Any, ...]:
    """What a leaf's work depends on beside its shapes: the static options (a traced decay or alpha is an
    argument of the work, the same function)."""
    literal = lambda v: v if _is_number(v) else "traced"  # noqa: E731
    return (
        "shampoo",
        config.max_matrix_size,
        literal(config.gbar_decay),
        literal(config.mat_gbar_decay),
        config.precond_update_interval,
        config.svd_interval,
        config.use_iterative_root,
        literal(config.alpha),
    )


def _compute_dtype(p: Any) -> Any:
    """float32, or float64 for a float64 parameter: bf16 leaves keep float32 statistics."""
    dt = p.dtype if hasattr(p, "dtype") else jnp.result_type(p)
    return jax.dtypes.canonicalize_dtype(jnp.promote_types(dt, jnp.float32))


def _statistics(p: Any, config: _Config) -> tuple[jax.Array, ...]:
    """The `mat_gbar` slot of `p`: per dimension, a [d, d] statistic, or [d] past `max_matrix_size`."""
    dims, dt = _dims(jnp.shape(p)), _compute_dtype(p)
    if config.use_iterative_root and any(1 < d <= config.max_matrix_size for d in dims):
        _roots_math.root_order(config.fn, len(dims), float(config.alpha))

    def statistic(i: int, d: int) -> jax.Array:
        if d <= config.max_matrix_size:
            return _matrix_work.state(p, jnp.zeros((d, d), dt))
        if jnp.shape(p):  # one entry per index of axis i, placed like it (or with the leaf's matrix work)
            diagonal = _placement.reduced(p, (i,), dt)
            worked = any(e <= config.max_matrix_size for e in dims)
            return _matrix_work.state(p, diagonal, placed=True) if worked else diagonal
        return _matrix_work.state(p, jnp.zeros((1,), dt))

    return tuple(statistic(i, d) for i, d in enumerate(dims))


def _roots(p: Any, config: _Config) -> tuple[jax.Array | None, ...]:
    """The `mat_h` slot of `p`: per matrix dimension, the root kept between renewals (from I), if any."""
    keep = config.svd_interval > 1
    dt = _compute_dtype(p)
    return tuple(
        _matrix_work.state(p, jnp.eye(d, dtype=dt)) if keep and d <= config.max_matrix_size else None
        for d in _dims(jnp.shape(p))
    )


__all__: list[str] = []
