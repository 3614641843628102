"""Muon's width scaling (optax.contrib's numbers): `scale_by_shape`, a factor of each matrix's shape."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax.numpy as jnp

from gradtx._algorithms.muon_dims import (
    MuonDimensionNumbers,
    _axes,
    _check_dims,
    _check_dims_tree,
    _with_dims,
)
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import update_rule


def _shape_leaf(u, h, *, consistent_rms: float | None, dims=None, path=None):
    """`u` times `sqrt(max(1, n_out / n_in))` (or `consistent_rms * sqrt(max(n_in, n_out))`) for a matrix."""
    del h
    d = None if dims is None else dims.get(path)
    if (d is None and u.ndim != 2) or u.size == 0:
        return (u,)
    d = MuonDimensionNumbers() if d is None else d
    if dims is not None:
        _check_dims("scale_by_shape", d, u.shape, path)
    red, out = _axes(d, u.ndim)
    fan_in, fan_out = math.prod(u.shape[a] for a in red), math.prod(u.shape[a] for a in out)
    if consistent_rms is None:
        factor: Any = jnp.sqrt(jnp.maximum(1, fan_out / fan_in))
    else:
        factor = jnp.sqrt(jnp.maximum(fan_in, fan_out)) * consistent_rms
    return (factor * u,)


@_registry.transform()
def scale_by_shape(
    consistent_rms: float | None = None, *, weight_dimension_numbers: Any = None
) -> _protocol.GradientTransformation:
    r"""Multiply each matrix leaf of the updates by a factor of its shape (Muon's width scaling).

    For a matrix with :math:`n_{in}` rows (the reduction axis of :math:`x W`) and
    :math:`n_{out}` columns:

    .. math::
        u \leftarrow \sqrt{\max(1, n_{out} / n_{in})}\; u
        \quad\text{or, with } \rho = \text{consistent\_rms},\quad
        u \leftarrow \rho \sqrt{\max(n_{in}, n_{out})}\; u

    The second form gives every matrix's orthogonalised update the RMS :math:`\rho` (0.2
    matches AdamW's, Liu et al.). Leaves that are not matrices are left as they are
    (`optax.contrib.scale_by_shape`). With `weight_dimension_numbers` (as `scale_by_muon`'s),
    :math:`n_{in}` and :math:`n_{out}` of a leaf given a `MuonDimensionNumbers` are the
    products of its reduction and output axes. A row-sparse update is densified first.

    Args:
      consistent_rms: :math:`\rho` (a number > 0), or None for the width scaling.
      weight_dimension_numbers: as `scale_by_muon`'s.

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Raises:
      ValueError: for a non-positive or non-finite `consistent_rms`.
      TypeError: for a `consistent_rms` that is not a number, or a dimension-numbers tree with
        other leaves; (when traced) ValueError for dimension numbers that do not fit their leaf.

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
    _check_dims_tree(fn, weight_dimension_numbers)

    def rule(dims):
        return update_rule(
            fn,
            _protocol.EmptyState,
            functools.partial(_shape_leaf, consistent_rms=consistent_rms, dims=dims),
            kind=_protocol.LeafWise,  # a factor of each matrix's shape
            count="if_scheduled",
            paths=dims is not None,
        )

    return rule(None) if weight_dimension_numbers is None else _with_dims(rule, weight_dimension_numbers)


__all__ = ["scale_by_shape"]
