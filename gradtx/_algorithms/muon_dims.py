"""Muon's weight dimension numbers: which axes of a leaf are its matrices' rows and columns.

`MuonDimensionNumbers` (optax.contrib's), their checks against a leaf, a leaf as a stack of
matrices and back, the dimension numbers of each leaf of a tree, and a rule made at each step
for the dimension numbers of its updates; `scale_by_muon`, `scale_by_shape` and `muon` read them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import jax

from gradtx import packing
from gradtx._core import checks as _checks
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import walk as _walk


class MuonDimensionNumbers(NamedTuple):
    """Which axes of a weight are the rows (reduction) and columns (output) of its matrices.

    For :math:`x W = y` the reduction axis is 0 and the output axis 1 (the default). Several
    axes may be given for either (their sizes multiply: a conv kernel `(h, w, c_in, c_out)` is
    `MuonDimensionNumbers((0, 1, 2), 3)`); every other axis is a batch axis, each of its
    entries a matrix orthogonalised on its own (stacked layers `(n, d_in, d_out)`:
    `MuonDimensionNumbers(1, 2)`). Negative axes count from the end. optax's
    `optax.contrib.MuonDimensionNumbers`.

    Attributes:
      reduction_axis: an axis or a sequence of axes: the matrices' rows.
      output_axis: an axis or a sequence of axes: the matrices' columns.
    """

    reduction_axis: int | Sequence[int] = 0
    output_axis: int | Sequence[int] = 1


def _axes(dims: MuonDimensionNumbers, ndim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`(reduction axes, output axes)` of `dims` for a leaf of rank `ndim`, as non-negative ints."""

    def norm(axes):
        return tuple(a % ndim for a in ((axes,) if isinstance(axes, int) else axes))

    return norm(dims.reduction_axis), norm(dims.output_axis)


def _check_dims(fn: str, dims: MuonDimensionNumbers, shape: tuple[int, ...], path: Any) -> None:
    """Refuse (at trace time) dimension numbers that do not fit the leaf: its rank, disjoint axes."""
    where = jax.tree_util.keystr(path) or "<root>"
    if len(shape) < 2:
        raise ValueError(
            f"`{fn}`: the leaf at {where} has shape {shape}; Muon's matrices need rank >= 2 ({dims})."
        )
    flat = [
        a
        for axes in (dims.reduction_axis, dims.output_axis)
        for a in ((axes,) if isinstance(axes, int) else axes)
    ]
    if any(not -len(shape) <= a < len(shape) for a in flat):
        raise ValueError(f"`{fn}`: {dims} has an axis out of range for the leaf at {where} of shape {shape}.")
    red, out = _axes(dims, len(shape))
    if set(red) & set(out) or len(set(red)) != len(red) or len(set(out)) != len(out):
        raise ValueError(
            f"`{fn}`: {dims} must name distinct axes, rows apart from columns (leaf at {where}: {shape})."
        )


def _as_matrices(x: jax.Array, dims: MuonDimensionNumbers) -> tuple[jax.Array, Any]:
    """`x` as a stack `(batch, rows, cols)` of matrices, and the function that gives `x`'s layout back.

    A plain matrix keeps its placement (a unit stack axis is added); a leaf whose axes are moved or
    merged is first made whole (Explicit axes: one all-gather), as the merge of a sharded axis needs."""
    red, out = _axes(dims, x.ndim)
    batch = tuple(a for a in range(x.ndim) if a not in red and a not in out)
    order = batch + red + out
    if order != (0, 1) or x.ndim != 2:
        x = _placement.whole(x)
    moved = x.transpose(order)
    stacked = moved.reshape(
        math.prod(x.shape[a] for a in batch),
        math.prod(x.shape[a] for a in red),
        math.prod(x.shape[a] for a in out),
    )
    inverse = tuple(sorted(range(x.ndim), key=lambda i: order[i]))
    return stacked, lambda y: y.reshape(moved.shape).transpose(inverse)


def _check_dims_tree(fn: str, dims: Any) -> None:
    """`dims` is None, a callable, or a tree whose leaves are `MuonDimensionNumbers` or None."""
    if dims is None or callable(dims) and not isinstance(dims, MuonDimensionNumbers):
        return
    for leaf in jax.tree.leaves(dims, is_leaf=lambda x: x is None or isinstance(x, MuonDimensionNumbers)):
        if leaf is not None and not isinstance(leaf, MuonDimensionNumbers):
            raise TypeError(
                f"`{_checks.api_name(fn)}`: `weight_dimension_numbers` must be None, a function of the "
                f"params or a tree of `MuonDimensionNumbers` (or None), got a leaf {leaf!r}."
            )


def dims_by_leaf(dims: Any, updates: Any) -> Any:
    """`{key path: MuonDimensionNumbers or None}` of `updates`' leaves from `dims`: a tree (of the updates'
    structure, or a prefix of it), a function of the updates giving one, or None (no leaf has any)."""
    if callable(dims) and not isinstance(dims, MuonDimensionNumbers):
        dims = dims(updates)
    out: dict[Any, Any] = {}
    if dims is None:
        return out
    given = jax.tree_util.tree_flatten_with_path(
        dims, is_leaf=lambda x: x is None or isinstance(x, MuonDimensionNumbers)
    )[0]
    for path, _ in jax.tree_util.tree_flatten_with_path(updates, is_leaf=_walk.is_update_leaf)[0]:
        out[path] = next((d for p, d in given if tuple(path[: len(p)]) == tuple(p)), None)
    return out


def _with_dims(rule: Any, weight_dimension_numbers: Any) -> _protocol.GradientTransformation:
    """`rule(dims)`, `dims` resolved from `weight_dimension_numbers` and each step's updates (by key path).

    Routing only: the state is the rule's (`init` is its), and each step runs the rule `update_rule` made
    for the dims of those updates (a function of the updates can only be resolved there)."""
    plain = rule({})

    def resolved_step(updates, state, params=None, **extra_args):
        return rule(dims_by_leaf(weight_dimension_numbers, updates)).update(
            updates, state, params, **extra_args
        )

    return packing.leaf_wise(_protocol.GradientTransformation(plain.init, resolved_step))


__all__ = ["MuonDimensionNumbers"]
