"""What the loss modules share: argument checks that name the loss, optax's axis rule, docstring sections.

The checks refuse what optax's losses refuse, with the same exception types (`TypeError` for a
dtype, `ValueError` for a shape or a value), and say which loss, which argument, what was given and
what is allowed.
"""

from __future__ import annotations

import operator
from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import docs as _docs

ArrayLike = jax.typing.ArrayLike
Axis = int | tuple[int, ...] | None


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(jnp.shape(x))


def check_floating(fn: str, name: str, x: Any) -> None:
    """`x` must have a floating-point dtype (optax's `check_subdtype(x, jnp.floating)`).

    Raises:
      TypeError: for an integer, bool or complex `x`.
    """
    dtype = jnp.result_type(x)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"`{fn}`: `{name}` must have a floating-point dtype, got {dtype}.")


def check_integer(fn: str, name: str, x: Any, instead: str) -> None:
    """`x` must have an integer dtype; `instead` names what to call for other labels.

    Raises:
      TypeError: for a float or bool `x`.
    """
    dtype = jnp.result_type(x)
    if not jnp.issubdtype(dtype, jnp.integer):
        raise TypeError(
            f"`{fn}`: `{name}` must have an integer dtype (class indices), got {dtype}; "
            f"for one-hot or probability labels use `{instead}`."
        )


def check_same_shape(fn: str, name_a: str, a: Any, name_b: str, b: Any) -> None:
    """`a` and `b` must have the same shape (the loss does not broadcast them).

    Raises:
      ValueError: for different shapes.
    """
    if _shape(a) != _shape(b):
        raise ValueError(
            f"`{fn}`: `{name_a}` and `{name_b}` must have the same shape, got {_shape(a)} and {_shape(b)}."
        )


def check_rank(fn: str, name: str, x: Any, rank: int, layout: str) -> None:
    """`x` must have `rank` dimensions, laid out as `layout` says.

    Raises:
      ValueError: for another number of dimensions.
    """
    if jnp.ndim(x) != rank:
        raise ValueError(f"`{fn}`: `{name}` must have rank {rank} ({layout}), got shape {_shape(x)}.")


def normalize_axis(fn: str, axis: Any, ndim: int) -> int:
    """`axis` as an index in `[0, ndim)` (numpy's `normalize_axis_index`).

    Raises:
      ValueError: for an axis outside `[-ndim, ndim)`.
    """
    index = operator.index(axis)
    if -ndim <= index < ndim:
        return index % ndim
    raise ValueError(f"`{fn}`: `axis` {index} is out of bounds for `logits` of rank {ndim}.")


axis_where = _docs.sections(
    AXIS_WHERE="""
    axis: the axis, or axes, along which to compute (those of the classes).
    where: optional mask of the elements to include in the computation.
    """
)
"""Fill `{AXIS_WHERE}`: the `axis` and `where` arguments of the losses that reduce along axes."""
