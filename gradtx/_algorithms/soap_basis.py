"""SOAP's eigenbases (`soap.py`'s rule): how a leaf is laid out for its preconditioner (pytorch-optimizer's
merged, channels-first dimensions), its rotation into an eigenbasis and back, the statistics' outer products,
the first basis (eigh) and its refresh (a power iteration and QR), and the `gg` and `q` slots. Functions of
one leaf, called by the rule inside the leaf's matrix work."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._algorithms.shampoo_statistics import _compute_dtype
from gradtx._core import control as _control
from gradtx._core import matrix_work as _matrix_work
from gradtx._core import scalars as _scalars

_HIGHEST = jax.lax.Precision.HIGHEST  # full float32 products (TPUs, TF32 GPUs round inputs otherwise)


class _Config(NamedTuple):
    """The static options of a `scale_by_soap`."""

    precondition_frequency: int
    max_precondition_dim: int
    merge_dims: bool
    precondition_1d: bool
    correct_bias: bool
    normalize_gradient: bool
    data_format: str


class _Layout(NamedTuple):
    """How a leaf is seen by the preconditioner: permuted to channels-first, reshaped to `dims`."""

    shape: tuple[int, ...]
    permute: bool  # a channels-last 4-D leaf merged as NCHW
    dims: tuple[int, ...]
    preconditioned: tuple[bool, ...]


def _merge_small_dims(shape: tuple[int, ...], max_dim: int) -> tuple[int, ...]:
    """pytorch-optimizer's `merge_small_dims`: neighbouring dimensions merged while their product <= max_dim.

    A shape merged whole is one dimension of its size here; the reference returns `[1]` and fails to reshape.
    """
    merged, product = [], 1
    for d in shape:
        product *= d
        if product > max_dim:
            merged.append(product // d)
            product = d
    merged.append(product)
    return tuple(merged)


def _layout(shape: tuple[int, ...], config: _Config) -> _Layout:
    shape = tuple(shape)
    limit = config.max_precondition_dim
    if len(shape) == 1:  # never merged; preconditioned only with `precondition_1d`
        return _Layout(shape, False, shape, (config.precondition_1d and shape[0] <= limit,))
    permute = config.merge_dims and config.data_format == "channels_last" and len(shape) == 4
    dims = (shape[0], shape[3], shape[1], shape[2]) if permute else shape
    if config.merge_dims and dims:
        dims = _merge_small_dims(dims, limit)
    return _Layout(shape, permute, dims, tuple(d <= limit for d in dims))


def _to_layout(x: jax.Array, layout: _Layout) -> jax.Array:
    if layout.permute:
        x = jnp.transpose(x, (0, 3, 1, 2))
    return x.reshape(layout.dims)


def _from_layout(x: jax.Array, layout: _Layout) -> jax.Array:
    if layout.permute:
        s = layout.shape
        return jnp.transpose(x.reshape(s[0], s[3], s[1], s[2]), (0, 2, 3, 1))
    return x.reshape(layout.shape)


def _project(x: jax.Array, q: tuple[Any, ...], backward: bool = False) -> jax.Array:
    """`x` in the eigenbasis (`Q_i^T` along each dimension i), or back from it: each contraction takes the
    first axis and appends the new one, so after all of them the axes are in their order again."""
    for qi in q:
        if qi is None:
            x = jnp.moveaxis(x, 0, -1)
        else:
            x = jnp.tensordot(x, qi, axes=([0], [1 if backward else 0]), precision=_HIGHEST)
    return x


def _lerp(a: jax.Array, b: jax.Array, w: Any) -> jax.Array:
    """torch's `a.lerp_(b, w)`: `a + w (b - a)` for w < 0.5, `b - (b - a)(1 - w)` otherwise (chosen here
    for a weight given as a number, in `a`'s dtype as torch's kernel does)."""
    if _scalars.is_python_number(w):
        w = np.asarray(w, a.dtype)
        return a + w * (b - a) if abs(w) < 0.5 else b - (b - a) * (1 - w)
    w = jnp.asarray(w, a.dtype)
    return jnp.where(jnp.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


def _outer(x: jax.Array, i: int) -> jax.Array:
    """`x` unfolded along axis i times its transpose: the [d_i, d_i] outer product of the statistic."""
    rest = [j for j in range(x.ndim) if j != i]
    return jnp.tensordot(x, x, axes=(rest, rest), precision=_HIGHEST)


def _eigenbasis(m: jax.Array) -> jax.Array:
    """The eigenvectors of the symmetric `m`, by decreasing eigenvalue (the reference's first basis).

    Within a repeated eigenvalue (the null space of a rank-deficient first statistic) the basis is the
    eigensolver's choice, as in the reference; tests/algorithms/test_soap.py gives this function the
    reference's choice to compare trajectories.
    """
    n = m.shape[0]
    return jnp.linalg.eigh(m + 1e-30 * jnp.eye(n, dtype=m.dtype))[1][:, ::-1]


def _refreshed(s: jax.Array, o: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One power iteration `GG Q`, its columns sorted by decreasing estimated eigenvalue `diag(Q^T GG Q)`,
    orthonormalized by QR: `(new Q, the order)`; the second moment's entries follow the columns."""
    product = jnp.matmul(s, o, precision=_HIGHEST)
    order = jnp.argsort(jnp.sum(o * product, axis=0), descending=True).astype(jnp.int32)
    return jnp.linalg.qr(jnp.take(product, order, axis=1))[0], order


def _new_basis(s: jax.Array, o: jax.Array, first: Any) -> tuple[jax.Array, jax.Array]:
    """A factor's basis from its statistic `s` and its last basis `o`: the eigenbasis of `s` at the first
    step (its columns in order), else the power-iteration refresh of `o`: `(new Q, the columns' order)`."""
    return _control.cond(
        first, lambda: (_eigenbasis(s), jnp.arange(s.shape[0], dtype=jnp.int32)), lambda: _refreshed(s, o)
    )


def _statistics(p: Any, config: _Config, fill: Any) -> tuple[jax.Array | None, ...]:
    """The `gg` (`fill` 0) or `q` (`fill` I) slot of `p`: a [d, d] matrix per preconditioned dimension."""
    layout, dt = _layout(jnp.shape(p), config), _compute_dtype(p)
    return tuple(
        _matrix_work.state(p, fill(d, dt)) if on else None
        for d, on in zip(layout.dims, layout.preconditioned, strict=True)
    )


__all__: list[str] = []
