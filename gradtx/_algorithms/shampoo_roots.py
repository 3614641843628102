"""Shampoo's matrix roots `(G + eps I)^neg_alpha`, as tf.contrib's `ShampooOptimizer` computes them: by SVD,
or by the coupled Schur-Newton iteration. Functions of one matrix, called inside a leaf's matrix work."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from gradtx import linalg
from gradtx._core import checks as _checks

ITER_COUNT = 100  # the Schur-Newton root: at most this many iterations ...


ITER_TOL = 1e-6  # ... stopping once max|M - I| <= this (contrib's `iter_count`, `epsilon`)


_HIGHEST = jax.lax.Precision.HIGHEST  # full float32 products (TPUs, TF32 GPUs round inputs otherwise)


def root_svd(mat_g, eps, neg_alpha):
    """`(G + eps I)^neg_alpha` as contrib's SVD root: `V max(s, eps)^neg_alpha U^T`."""
    n = mat_g.shape[0]
    # the statistic is symmetric: its transpose is the same matrix, and LAPACK's column-major one is the
    # row-major matrix as it lies (no transposing copy of each matrix of the stack)
    u, s, vh = jnp.linalg.svd((mat_g + eps * jnp.eye(n, dtype=mat_g.dtype)).T, full_matrices=True)
    return jnp.matmul(vh.T * jnp.power(jnp.maximum(s, eps), neg_alpha), u.T, precision=_HIGHEST)


def root_iterative(mat_g, eps, neg_alpha, p: int):
    """`(G + eps I)^neg_alpha`, neg_alpha = -1/p, by the coupled Schur-Newton iteration (Guo-Higham 3.2)."""
    n = mat_g.shape[0]
    eye = jnp.eye(n, dtype=mat_g.dtype)
    damped = mat_g + eps * eye
    z = (1 - 1 / neg_alpha) / (2 * jnp.linalg.norm(damped))

    def cond(carry):
        i, mat_m, _ = carry
        return (i < ITER_COUNT) & (jnp.max(jnp.abs(mat_m - eye)) > ITER_TOL)

    def body(carry):
        i, mat_m, mat_x = carry
        return i + 1, *linalg.newton_root_step(mat_m, mat_x, neg_alpha, p, _HIGHEST)

    init = (jnp.zeros([], jnp.int32), damped * z, eye * jnp.power(z, -neg_alpha))
    return jax.lax.while_loop(cond, body, init)[2]


def root_order(fn: str, rank: int, alpha: float) -> int:
    """p = rank / alpha for the iterative root; it must be a positive integer."""
    p = rank / float(alpha)
    if not (p >= 1 and abs(p - round(p)) <= 1e-9 * p):
        raise ValueError(
            f"`{_checks.api_name(fn)}`: with `use_iterative_root=True`, rank / `alpha` must be a positive "
            f"integer (the Schur-Newton iteration takes integer roots); a leaf of rank {rank} with "
            f"alpha={alpha!r} gives {p!r}. Use an alpha such as 0.5 or 1.0, or the SVD root."
        )
    return round(p)


def root(d: int, rank: int, iterative: bool, alpha: Any, fn: str) -> Callable[..., jax.Array]:
    """The function `(G, eps, neg_alpha) -> (G + eps I)^neg_alpha` for a `d x d` statistic of a rank-`rank`
    leaf (`fn`: the transform named in an error)."""
    if d == 1:
        return lambda v, eps, neg_alpha: jnp.power(v + eps, neg_alpha)
    if iterative:
        p = root_order(fn, rank, alpha)
        return lambda v, eps, neg_alpha: root_iterative(v, eps, neg_alpha, p)
    return root_svd


__all__: list[str] = []
