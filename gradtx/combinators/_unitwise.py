"""Unit-wise norms and clipping: `unitwise_norm`, `unitwise_clip` (NFNets' units, a row or an output channel).

The one home of the unit conventions: `gradtx.adaptive_grad_clip` clips with these.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas


def unit_axes(fn: str, path: str, shape: tuple[int, ...], axis: Any) -> tuple[int, ...] | None:
    """The axes a unit-wise norm sums over (None: all); optax's defaults by rank when `axis` is None."""
    if axis is not None:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        if any(not -len(shape) <= a < len(shape) for a in axes):
            raise ValueError(
                f"`{fn}`: `axis` {axis!r} is out of range for the parameter {path} of shape {shape}."
            )
        return axes
    if sum(d != 1 for d in shape) <= 1:
        return None  # scalars and vectors: one unit
    if len(shape) in (2, 3):
        return (0,)  # linear layers [in, out] and multi-head ones: one unit per output
    if len(shape) in (4, 5):
        return tuple(range(len(shape) - 1))  # convolutions [..., in, out]: one unit per output channel
    raise ValueError(
        f"`{fn}`: the parameter {path} has shape {shape}; without `axis` the units are known for 1 to 5 "
        f"dimensions only: pass `axis=` (the axes each unit's norm sums over)."
    )


def unit_norm(x: jax.Array, axes: tuple[int, ...] | None) -> jax.Array:
    """The L2 norm of each unit of `x` (summed in at least float32), broadcastable against `x`."""
    return jnp.sqrt(_formulas.squared_norm(x, axis=axes, keepdims=True))


def check_axis(fn: str, axis: Any) -> None:
    """`axis` must be None, an int or a non-empty tuple or list of ints."""
    if axis is not None and not (
        (isinstance(axis, int) and not isinstance(axis, bool))
        or (
            isinstance(axis, (tuple, list))
            and axis
            and all(isinstance(a, int) and not isinstance(a, bool) for a in axis)
        )
    ):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `axis` must be None, an int or a tuple of ints, got {axis!r}."
        )


def unitwise_norm(x: jax.Array, axis: int | Sequence[int] | None = None) -> jax.Array:
    r"""The L2 norm of each unit of `x`, broadcast to `x`'s shape (`optax.transforms.unitwise_norm`).

    .. math:: n_i = \lVert x_i \rVert_2 \quad \text{for every element of unit } i

    A unit is a slice of `x` summed over `axis`. Without `axis`, the layer conventions of
    `adaptive_grad_clip`: a scalar or vector (size-1 axes aside) is one unit; a matrix
    `[in, out]` or a 3-D multi-head kernel sums over axis 0 (one unit per output); a 4-D
    (HWIO) or 5-D convolution kernel over all axes but the last (one unit per output
    channel). Squares are summed in at least float32; the result has `x`'s real dtype.

    Args:
      x: an array.
      axis: the axis or axes each unit's norm sums over (instead of the defaults by rank).

    Returns:
      An array shaped like `x`: each element the norm of its unit.

    Raises:
      TypeError: for a bad `axis`.
      ValueError: for an `axis` out of range, or a rank above 5 without `axis`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.unitwise_norm(jnp.array([[3.0, 0.0], [4.0, 1.0]]))  # columns: norms 5 and 1
        Array([[5., 1.],
               [5., 1.]], dtype=float32)

    References:
      Brock, De, Smith, Simonyan, *High-Performance Large-Scale Image Recognition Without
      Normalization*, ICML 2021.
    """
    fn = "unitwise_norm"
    check_axis(fn, axis)
    x = jnp.asarray(x)
    norm = unit_norm(x, unit_axes(_checks.api_name(fn), "`x`", tuple(x.shape), axis))
    return jnp.broadcast_to(norm.astype(_formulas.real_dtype(x.dtype)), x.shape)


def unitwise_clip(
    g_norm: jax.Array, max_norm: jax.Array, grad: jax.Array, div_eps: float = 1e-6
) -> jax.Array:
    r"""Scale each unit of `grad` whose norm reaches `max_norm` down to norm `max_norm`.

    .. math:: g \leftarrow \begin{cases} g & n < m \\ g\, m / \max(n, \delta) & \text{otherwise} \end{cases}

    element by element, with :math:`n` = `g_norm` and :math:`m` = `max_norm` given per
    element (as `unitwise_norm` gives them, or broadcastable against `grad`). :math:`\delta`
    only guards the division (`optax.transforms.unitwise_clip`; optax wants the three
    shapes equal).

    Args:
      g_norm: the norm of each element's unit of `grad`.
      max_norm: the largest norm each unit keeps.
      grad: the gradient.
      div_eps: :math:`\delta`, the smallest divisor, > 0.

    Returns:
      `grad` with its large units scaled down, in `grad`'s dtype.

    Raises:
      ValueError: if `g_norm` or `max_norm` does not broadcast against `grad`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> g = jnp.array([[0.0, 0.3], [2.0, 0.4]])
        >>> gradtx.unitwise_clip(gradtx.unitwise_norm(g), jnp.array([[1.0, 1.0]]), g)  # norms 2, 0.5
        Array([[0. , 0.3],
               [1. , 0.4]], dtype=float32)
    """
    g_norm, max_norm, grad = jnp.asarray(g_norm), jnp.asarray(max_norm), jnp.asarray(grad)
    for name, x in (("g_norm", g_norm), ("max_norm", max_norm)):
        try:
            jnp.broadcast_shapes(x.shape, grad.shape)
        except ValueError:
            raise ValueError(
                f"`{_checks.api_name('unitwise_clip')}`: `{name}` of shape {x.shape} does not broadcast "
                f"against `grad` of shape {grad.shape}."
            ) from None
    clipped = grad * (max_norm / jnp.maximum(g_norm, div_eps)).astype(grad.dtype)
    return jnp.where(g_norm < max_norm, grad, clipped)
