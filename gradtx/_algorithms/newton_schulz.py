"""Newton-Schulz orthogonalisation: the iteration that pushes a matrix's singular values towards 1 (Muon's),
its coefficients and optax's scalings of the first iterate."""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks

NS_COEFFS = (3.4445, -4.7750, 2.0315)
"""Keller Jordan's quintic Newton-Schulz coefficients `(a, b, c)`: fast, not exactly orthogonal."""


def check_coeffs(fn: str, ns_coeffs: Any) -> tuple[tuple[float, float, float], ...]:
    """`ns_coeffs` as a tuple of triples: one triple (used every iteration) or one per iteration."""

    def is_triple(x):
        return (
            isinstance(x, Sequence)
            and len(x) == 3
            and all(isinstance(c, numbers.Real) and not isinstance(c, bool) and math.isfinite(c) for c in x)
        )

    if is_triple(ns_coeffs):
        return (tuple(float(c) for c in ns_coeffs),)  # type: ignore[return-value]
    if isinstance(ns_coeffs, Sequence) and ns_coeffs and all(is_triple(x) for x in ns_coeffs):
        return tuple(tuple(float(c) for c in x) for x in ns_coeffs)  # type: ignore[misc]
    raise ValueError(
        f"`{_checks.api_name(fn)}`: `ns_coeffs` must be three finite numbers (a, b, c) or a non-empty "
        f"sequence of such triples (one per iteration), got {ns_coeffs!r}."
    )


PRECONDITIONINGS = ("frobenius", "spectral", "aol", "schatten")
"""How the matrix is scaled before (or in) the first Newton-Schulz iteration: optax's four choices."""

_RESCALE_FLOOR = 1e-8
"""The least row sum (AOL) or Schatten-4 norm the first iteration divides by (optax's, whatever `eps`)."""


def _first_gram(x: jax.Array, preconditioning: str, eps: Any) -> tuple[jax.Array, jax.Array]:
    """`(x, x x^T)` for the first iteration, `x` scaled as `preconditioning` says.

    'frobenius' and 'spectral' divide `x` by its norm plus `eps`; 'aol' scales row `i` of `x` (and row and
    column `i` of the Gram matrix) by `1/sqrt(sum_j |A_ij|)`, which bounds every singular value by 1
    (Prach, Lampert); 'schatten' divides `x` by the square root of the Gram matrix's Frobenius norm (the
    Schatten-4 norm of `x`)."""
    if preconditioning in ("frobenius", "spectral"):
        x = x / (jnp.linalg.norm(x, ord="fro" if preconditioning == "frobenius" else 2) + eps)
        return x, x @ x.T
    gram = x @ x.T
    if preconditioning == "aol":
        s = jax.lax.rsqrt(jnp.clip(jnp.abs(gram).sum(axis=-1), min=_RESCALE_FLOOR))[:, None]
        return x * s, gram * s * s.T
    s = jax.lax.rsqrt(jnp.clip(jnp.linalg.norm(gram, ord="fro"), min=_RESCALE_FLOOR))
    return x * s, gram * s**2


def newton_schulz(
    x: jax.Array, coeffs: tuple[tuple[float, float, float], ...], eps: Any, preconditioning: str = "frobenius"
) -> jax.Array:
    """The Newton-Schulz iteration `x <- a x + (b A + c A^2) x`, `A = x x^T`, from `x` scaled by
    `_first_gram` (by default `x / (||x||_F + eps)`)."""
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    x, gram = _first_gram(x, preconditioning, eps)
    for i, (a, b, c) in enumerate(coeffs):
        gram = gram if i == 0 else x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


__all__: list[str] = []
