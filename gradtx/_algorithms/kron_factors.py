"""PSGD's Kronecker factors (`psgd_kron`): the einsum expressions of a leaf, Li's Lie-group update of the
factors towards `P E[g g^T] P = E[v v^T]`, their balancing. One leaf's factors at a time: the rule runs them
as each leaf's matrix work."""

from __future__ import annotations

import string

import jax
import jax.numpy as jnp

_LETTERS = string.ascii_lowercase + string.ascii_uppercase
_HIGHEST = jax.lax.Precision.HIGHEST


def expressions(qs):
    """A leaf's einsum expressions (psgd-jax's): `A = Q x`, each factor's statistics, `Q^T Q m`."""
    if len(qs) == 1 and qs[0].ndim == 0:
        return ",->", (",->",), ",,->"
    n, L = len(qs), _LETTERS  # noqa: N806
    qa, qp, qp2, ga, oa, gp, op, stats = [], [], [], "", "", "", "", []
    for i, q in enumerate(qs):
        a, b, c = L[i], L[i + 13], L[i + 26]
        left = "".join(b if j == i else L[j] for j in range(n))
        if q.ndim < 2:  # diagonal
            qa, ga, oa = [*qa, a], ga + a, oa + a
            qp, qp2, gp, op = [*qp, b], [*qp2, b], gp + b, op + b
            stats.append(f"{left},{left}->{b}")
        else:
            qa, ga, oa = [*qa, a + b], ga + b, oa + a
            qp, qp2, gp, op = [*qp, a + b], [*qp2, a + c], gp + c, op + b
            stats.append(f"{left},{''.join(c if j == i else L[j] for j in range(n))}->{b}{c}")
    return f"{','.join(qa)},{ga}->{oa}", tuple(stats), f"{','.join(qp)},{','.join(qp2)},{gp}->{op}"


def norm_lower_bound(a):
    """A cheap lower bound of the spectral norm of `a` (within a factor ~sqrt(2) of it)."""
    max_abs = jnp.max(jnp.abs(a))

    def calc(a):
        a = a / max_abs
        aa = a * a
        s0, s1 = jnp.sum(aa, axis=0), jnp.sum(aa, axis=1)
        i, j = jnp.argmax(s0), jnp.argmax(s1)

        def by_column():
            x = jnp.matmul(jax.lax.dynamic_index_in_dim(a, i, 1, keepdims=False), a, precision=_HIGHEST)
            return max_abs * jnp.linalg.norm(jnp.matmul(x / jnp.linalg.norm(x), a.T, precision=_HIGHEST))

        def by_row():
            x = jnp.matmul(a, jax.lax.dynamic_index_in_dim(a, j, 0, keepdims=False), precision=_HIGHEST)
            return max_abs * jnp.linalg.norm(jnp.matmul(a.T, x / jnp.linalg.norm(x), precision=_HIGHEST))

        return jax.lax.cond(s0[i] > s1[j], by_column, by_row)

    return jax.lax.cond(max_abs > 0, calc, lambda _: max_abs, a)


def conj_b(qs, v):
    """`V` times the inverse of the preconditioner's factor, axis by axis (triangular solves)."""
    order = v.ndim
    p = list(range(order))
    b = jnp.transpose(v, p[1:] + p[:1])
    for i, q in enumerate(qs):
        if q.ndim < 2:
            b = b / q
        else:
            flat = b.reshape(-1, b.shape[-1])
            b = jax.lax.linalg.triangular_solve(q, flat, left_side=False, lower=False).reshape(b.shape)
        if i < order - 1:
            b = jnp.swapaxes(b, i, order - 1)
    return b


def update_factors(qs, g, v, lr):
    """One step of the factors towards `P E[g g^T] P = E[v v^T]` (Li's Lie-group update)."""
    expr_a, expr_gs, _ = expressions(qs)
    a = jnp.einsum(expr_a, *qs, g, precision=_HIGHEST)
    b = conj_b(qs, v)
    out = []
    for expr, q in zip(expr_gs, qs, strict=True):
        term1 = jnp.einsum(expr, a, a, precision=_HIGHEST)
        term2 = jnp.einsum(expr, b, b, precision=_HIGHEST)
        tmp = (term1 - term2) * lr
        tiny = jnp.finfo(q.dtype).tiny
        if q.ndim < 2:
            q = q - tmp * q / (jnp.max(jnp.abs(term1 + term2)) + tiny)
        else:
            step = jnp.triu(tmp) / (norm_lower_bound(term1 + term2) + tiny)
            q = q - jnp.matmul(step, q, precision=_HIGHEST)
        out.append(q)
    return tuple(out)


def balance_factors(qs):
    """The factors rescaled to equal largest magnitudes (their product unchanged)."""
    if len(qs) < 2 or any(q.size == 0 for q in qs):
        return qs
    norms = jnp.stack([jnp.max(jnp.abs(q)).astype(jnp.float32) for q in qs])
    gmean = jnp.prod(norms) ** (1 / len(qs))
    return tuple(q * (gmean / n).astype(q.dtype) for q, n in zip(qs, norms, strict=True))


__all__: list[str] = []
