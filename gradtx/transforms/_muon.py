"""Muon's building blocks: `scale_by_muon` (momentum orthogonalised by Newton-Schulz) and `scale_by_shape`."""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _placement, _protocol, _tree
from gradtx._update_rule import Slot, update_rule
from gradtx.transforms._bias_corrected_adam import corrections, first_moment_estimate

NS_COEFFS = (3.4445, -4.7750, 2.0315)
"""Keller Jordan's quintic Newton-Schulz coefficients `(a, b, c)`: fast, not exactly orthogonal."""


class ScaleByMuonState(NamedTuple):
    """State of `scale_by_muon`."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # the moving average of the gradients (starts at 0)


def _check_coeffs(fn: str, ns_coeffs: Any) -> tuple[tuple[float, float, float], ...]:
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


def _newton_schulz(x: jax.Array, coeffs: tuple[tuple[float, float, float], ...], eps: Any) -> jax.Array:
    """The Newton-Schulz iteration `x <- a x + (b A + c A^2) x`, `A = x x^T`, from `x / (||x||_F + eps)`."""
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    x = x / (jnp.linalg.norm(x, ord="fro") + eps)
    for a, b, c in coeffs:
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


def _muon_leaf(g, m, h, *, coeffs, nesterov, adaptive):
    """One leaf: `(update, momentum)`; matrices are orthogonalised, other leaves keep the momentum."""
    m = _tree.moment_blend(m, g, h.beta)
    m_hat = first_moment_estimate(m, g, h.beta, h, nesterov)
    if g.ndim != 2:
        return m_hat, m
    # whole on every device (Explicit axes: one all-gather), orthogonalised there, sliced back
    out = jax.vmap(lambda x: _newton_schulz(x, coeffs, h.eps))(_placement.whole(m_hat)[None])[0]
    out = _placement.placed_like(out, m_hat)
    return (jnp.sum(m_hat * out) * out if adaptive else out), m


@_base.api
def scale_by_muon(
    ns_coeffs: Sequence[float] | Sequence[Sequence[float]] = NS_COEFFS,
    ns_steps: int = 5,
    beta: _protocol.ScalarOrSchedule = 0.95,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    nesterov: bool = True,
    adaptive: bool = False,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Muon: replace each matrix's (Nesterov) momentum by an approximately orthogonal matrix.

    With :math:`\hat m_t` the bias-corrected momentum of `scale_by_bias_corrected_adam`'s
    first moment (decay :math:`\beta`, Nesterov's form by default), a matrix leaf becomes

    .. math::
        X_0 = \frac{\hat m_t}{\lVert \hat m_t\rVert_F + \epsilon}, \qquad
        X_{k+1} = a X_k + \big(b\, A_k + c\, A_k^2\big) X_k, \quad A_k = X_k X_k^\top, \qquad
        u_t = X_K

    (on the transpose when it has more rows than columns), which pushes every singular
    value of :math:`\hat m_t` towards 1: :math:`u_t \approx U V^\top` for
    :math:`\hat m_t = U S V^\top`. With `adaptive`, :math:`u_t \leftarrow \langle \hat m_t,
    u_t\rangle\, u_t`. Leaves that are not matrices get :math:`\hat m_t` itself (the `muon`
    alias gives them to another optimizer). These are the numbers of
    `optax.contrib.scale_by_muon` (Frobenius preconditioning). A row-sparse gradient is
    densified first. Under `jax.jit` with Explicit mesh axes (`jax.set_mesh`), a sharded
    matrix is gathered whole onto every device (one all-gather per sharded mesh axis), its
    iteration runs there without communication, and its update is sliced back to the
    parameter's sharding; with Auto axes XLA chooses.

    Args:
      ns_coeffs: :math:`(a, b, c)`, used in each of `ns_steps` iterations, or a sequence of
        such triples, one per iteration (then `ns_steps` is not used).
      ns_steps: the number of Newton-Schulz iterations :math:`K`, an int >= 1.
      beta: the momentum's decay, in [0, 1).
      eps: added to the Frobenius norm, >= 0.
      nesterov: use Nesterov's form of the momentum.
      adaptive: scale by the inner product of the momentum and its orthogonalisation.
      mu_dtype: dtype of the momentum (default: each param's dtype).

    Returns:
      A `GradientTransformation` with state `ScaleByMuonState(count, momentum)`.

    Raises:
      ValueError: for malformed `ns_coeffs`, `ns_steps` < 1, `beta` outside [0, 1) or a
        negative `eps`.
      TypeError: for a non-int `ns_steps`, non-bool flags or a `mu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_muon(ns_coeffs=(1.5, -0.5, 0.0), ns_steps=30)  # the classic cubic: exact
        >>> u, _ = tx.update(jnp.array([[3.0, 0.0], [0.0, 0.5]]), tx.init(jnp.zeros((2, 2))))
        >>> [[round(float(x), 3) for x in row] for row in u]  # U V^T of a diagonal matrix: the identity
        [[1.0, 0.0], [0.0, 1.0]]

    References:
      Jordan et al., *Muon: an optimizer for hidden layers in neural networks*, 2024
      (https://kellerjordan.github.io/posts/muon/); Bernstein, Newhouse, *Old optimizer, new
      norm: an anthology*, 2024 (arXiv:2409.20325).
    """
    fn = "scale_by_muon"
    coeffs = _check_coeffs(fn, ns_coeffs)
    _checks.check_int(fn, "ns_steps", ns_steps, minimum=1)
    if len(coeffs) == 1:
        coeffs = coeffs * ns_steps
    _checks.check_in_range(fn, "beta", beta, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "nesterov", nesterov)
    _checks.check_bool(fn, "adaptive", adaptive)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)

    return update_rule(
        fn,
        ScaleByMuonState,
        functools.partial(_muon_leaf, coeffs=coeffs, nesterov=nesterov, adaptive=adaptive),
        hyper={"beta": beta, "eps": eps},
        slots={"momentum": Slot(0.0, mu_dtype)},
        prepare=functools.partial(corrections, b1="beta", b2=None, nesterov=nesterov),
        kind=_protocol.LeafWise,  # matrices are orthogonalised whole
        real_only="its Newton-Schulz iteration orthogonalizes real matrices",
    )


def _shape_leaf(u, h, *, consistent_rms: float | None):
    """`u` times `sqrt(max(1, n_out / n_in))` (or `consistent_rms * sqrt(max(n_in, n_out))`) for a matrix."""
    del h
    if u.ndim != 2 or u.size == 0:
        return (u,)
    fan_in, fan_out = u.shape
    if consistent_rms is None:
        factor: Any = jnp.sqrt(jnp.maximum(1, fan_out / fan_in))
    else:
        factor = jnp.sqrt(jnp.maximum(fan_in, fan_out)) * consistent_rms
    return (factor * u,)


@_base.api
def scale_by_shape(consistent_rms: float | None = None) -> _protocol.GradientTransformation:
    r"""Multiply each matrix leaf of the updates by a factor of its shape (Muon's width scaling).

    For a matrix with :math:`n_{in}` rows (the reduction axis of :math:`x W`) and
    :math:`n_{out}` columns:

    .. math::
        u \leftarrow \sqrt{\max(1, n_{out} / n_{in})}\; u
        \quad\text{or, with } \rho = \text{consistent\_rms},\quad
        u \leftarrow \rho \sqrt{\max(n_{in}, n_{out})}\; u

    The second form gives every matrix's orthogonalised update the RMS :math:`\rho` (0.2
    matches AdamW's, Liu et al.). Leaves that are not matrices are left as they are
    (`optax.contrib.scale_by_shape`). A row-sparse update is densified first.

    Args:
      consistent_rms: :math:`\rho` (a number > 0), or None for the width scaling.

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Raises:
      ValueError: for a non-positive or non-finite `consistent_rms`.
      TypeError: for a `consistent_rms` that is not a number.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_shape()
        >>> tx.update(jnp.ones((2, 8)), tx.init(None))[0][0, 0]  # sqrt(8 / 2)
        Array(2., dtype=float32)

    References:
      Jordan et al., *Muon: an optimizer for hidden layers in neural networks*, 2024; Liu et
      al., *Muon is scalable for LLM training*, 2025 (arXiv:2502.16982).
    """
    fn = "scale_by_shape"
    if consistent_rms is not None:
        _checks.check_number(fn, "consistent_rms", consistent_rms)
        _checks.check_finite(fn, "consistent_rms", consistent_rms)
        _checks.check_positive(fn, "consistent_rms", consistent_rms)

    return update_rule(
        fn,
        _protocol.EmptyState,
        functools.partial(_shape_leaf, consistent_rms=consistent_rms),
        kind=_protocol.LeafWise,  # a factor of each matrix's shape
        count="if_scheduled",
    )
