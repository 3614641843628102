"""PSGD Kron per leaf (`psgd_kron.py`'s rule): a leaf's Kronecker factors as the `preconditioners` slot starts
them (triangular or diagonal per dimension), the step's random numbers (psgd-jax's keys), and a leaf's matrix
work (the factors' update, then the preconditioned direction), on `kron_factors.py`'s math."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._algorithms import kron_factors as _factors_math
from gradtx._core import control as _control
from gradtx._core import matrix_work as _matrix_work

_HIGHEST = jax.lax.Precision.HIGHEST


def _diagonal(shape, max_size, min_ndim, memory_save_mode) -> list[bool]:
    """Which dimensions of a leaf of `shape` get a diagonal factor (the others an upper triangular one)."""
    forced = [memory_save_mode == "all_diag"] * len(shape)
    largest = int(np.argsort(shape)[::-1][0]) if shape else 0
    top = sorted(shape)[-2:]
    if memory_save_mode == "one_diag" or (
        memory_save_mode == "smart_one_diag" and len(top) == 2 and top[1] > top[0]
    ):
        forced[largest] = True
    return [d == 1 or d > max_size or len(shape) < min_ndim or f for d, f in zip(shape, forced, strict=True)]


def _factors(p, *, scale, max_size, min_ndim, memory_save_mode, dtype):
    """The `preconditioners` slot of `p`: per dimension, `scale^(1/ndim)` times I (triangular) or ones."""
    shape, dt = tuple(jnp.shape(p)), _precond_dtype(p, dtype)
    if not shape:
        return (_matrix_work.state(p, jnp.full((), scale, dt)),)
    s = scale ** (1 / len(shape))
    diag = _diagonal(shape, max_size, min_ndim, memory_save_mode)
    return tuple(
        _matrix_work.state(p, s * (jnp.ones(d, dt) if dg else jnp.eye(d, dtype=dt)))
        for d, dg in zip(shape, diag, strict=True)
    )


def _precond_dtype(p, dtype):
    dt = p.dtype if hasattr(p, "dtype") else jnp.result_type(p)
    return jax.dtypes.canonicalize_dtype(dtype or jnp.promote_types(dt, jnp.float32))


def _draws(seed, count, n):
    """The step's random numbers: a uniform (balance the factors when below `balance_prob`) and a key per
    leaf for its normal array (`_normal`, drawn only on a step that updates the factors); psgd-jax's keys
    (`fold_in(PRNGKey(seed), count)`, split as it does)."""
    _, key = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), count))
    key, sub = jax.random.split(key)
    u = jax.random.uniform(sub)
    _, sub = jax.random.split(key)
    return u, jax.random.split(sub, n)


def _normal(key, like):
    """A leaf's normal array, shaped like `like`, from its key of `_draws`."""
    return jax.random.normal(key, like.shape, like.dtype)


def _leaf_step(parts, lr, balance, update, keys, *, config, dtype):
    """One leaf's work: its factors after an update (on a step that draws one: balanced when `balance`, then
    one step towards `P E[g g^T] P = E[v v^T]` from the input `x`, damped, and a normal `v` from its key of
    `keys`), and its direction `Q^T Q m` in `dtype`, its RMS clipped to 1.1. `parts`: the factors, the
    leaf's position in `keys`, its momentum `m` and, unless the momentum is the input, its input `x`."""
    if config.momentum_into:
        *qs, position, m = parts
        x = m
    else:
        *qs, position, m, x = parts
    key = keys[position]

    def new_factors(qs):
        qs = _control.cond(balance, _factors_math.balance_factors, lambda q: q, qs)
        v = _normal(key, x)
        damped = x + (config.damping * jnp.mean(jnp.abs(x))).astype(x.dtype) * v if config.damping else x
        return _factors_math.update_factors(qs, damped, v, lr)

    qs = _control.cond(update, new_factors, lambda q: q, tuple(qs))
    pg = jnp.einsum(_factors_math.expressions(qs)[2], *qs, *qs, m, precision=_HIGHEST).astype(dtype)
    rms = jnp.sqrt(jnp.mean(jnp.square(pg)))
    return qs, pg * jnp.minimum(1.1 / (rms + config.clip_eps), 1.0)


__all__: list[str] = []
