"""Reductions over all the elements, and arrays shaped like whole leaves: declared once, exact on slices.

A rule that reduces over every element of the updates (a global norm, an all-finite test,
a NaN flag per parameter) writes its reduction as always, over the arrays it is given,
and passes the result through `total` before using it (a mean divides by `leaf_size`); a
rule that draws an array shaped like a whole leaf (gradient noise) draws it through
`leaf_part`; a rule that reduces a leaf over some of its axes (a factored statistic: Adafactor's
row and column means) takes them from `leaf_means` / `leaf_maxima`. All are the identity
(`leaf_part` just calls `make(x.shape)`) unless the arrays the rule is given are parts of
the leaves: `parallel.sharded_state` inside `shard_map` / `pmap` gives its transform one
replica's flat slice of every leaf, and sets a `Parts` here for the duration of that
`update` (`holding`). `total` then combines the replicas' partial results with one
collective (a sum of sums of squares is the sum of squares), and `leaf_part` cuts the
whole leaf's array to the replica's slice; `leaf_means` places the slice in a leaf of zeros
(`in_leaf`), reduces it over the axes, and combines the replicas' partial sums with one
collective -- the formula stays in one place, its numbers equal the unsharded rule's, and the
collectives stay in `gradtx.parallel`.

Each is traced inside a named scope (`TOTAL_SCOPE`, `LEAF_SCOPE`, `SHARE_SCOPE`), by which the check of
`sharded_state` (`parallel._elementwise`) tells a declared reduction from an undeclared one.
A blockwise-quantized slot (`gradtx._core.lowbit`) mixes the elements of each block: it is
quantized and dequantized inside `BLOCK_SCOPE`, and exact on a slice whose blocks are the whole
leaf's, which its `init` checks (`leaf_shape`).
A rule must call `total` on a result that is the reduction `op` of per-element terms
(a sum of per-element values, a max, an all / any), not on a function of it (a square
root): `total(sum(x * x))`, then `sqrt`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any, Callable, Iterator, Protocol, Sequence

import jax
import jax.numpy as jnp

TOTAL_SCOPE = "gradtx_total"
LEAF_SCOPE = "gradtx_whole_leaf"
SHARE_SCOPE = "gradtx_leaf_share"
BLOCK_SCOPE = "gradtx_blocks"
OPS = ("sum", "max", "min", "all", "any")
"""How partial results combine: `sum`, `max`, `min` of numbers, `all`, `any` of bools."""


class Parts(Protocol):
    """What runs `total` and `leaf_part` when a rule is given parts of the leaves (set by `holding`)."""

    def total(self, partial: Any, op: str) -> Any:
        """The reduction `op` over every part of `partial` (a pytree of this part's results)."""
        ...

    def leaf_part(self, path: Any, x: jax.Array, make: Callable[[tuple[int, ...]], jax.Array]) -> jax.Array:
        """`make(shape)`, shaped like the whole leaf at `path`, cut to the part `x` holds."""
        ...

    def leaf_size(self, path: Any, x: jax.Array) -> int:
        """The number of elements of the whole leaf at `path`, of which `x` is a part."""
        ...

    def leaf_shape(self, path: Any, x: Any) -> tuple[int, ...] | None:
        """The shape of the whole leaf at `path`, of which `x` is a part (or which `x` is); None where `x`
        is not a part of the leaf at `path` (a combinator changed the tree)."""
        ...

    def in_leaf(self, path: Any, x: jax.Array, fill: float) -> jax.Array:
        """`x` where its elements are in the whole leaf at `path`, `fill` at the other parts' elements."""
        ...


_PARTS: contextvars.ContextVar[Parts | None] = contextvars.ContextVar("gradtx_parts", default=None)


def total(partial: Any, op: str = "sum") -> Any:
    """`partial` -- the reduction `op` over the elements this rule was given -- as the one over all elements.

    Args:
      partial: a pytree of arrays (usually one scalar, or one per leaf): this rule's
        reduction over the arrays it was given, e.g. `sum(x * x)` over every leaf.
      op: one of `OPS`, the reduction `partial` is.

    Returns:
      `partial` itself, unless the rule runs on parts of the leaves (`sharded_state` in
      `shard_map`): then the reduction `op` of every part's `partial`, the same on all.
    """
    if op not in OPS:
        raise ValueError(f"`total`: `op` must be one of {', '.join(map(repr, OPS))}; got {op!r}.")
    parts = _PARTS.get()
    if parts is None:
        return partial
    with jax.named_scope(TOTAL_SCOPE):
        return parts.total(partial, op)


def leaf_part(path: Any, x: jax.Array, make: Callable[[tuple[int, ...]], jax.Array]) -> jax.Array:
    """`make(shape)` for the whole leaf at `path` (e.g. noise), where the rule holds `x` of that leaf.

    Args:
      path: the leaf's key path (as `jax.tree_util.tree_map_with_path` gives it).
      x: what the rule holds of the leaf: the leaf itself, or a part of it.
      make: a function of a shape returning an array of that shape.

    Returns:
      `make(x.shape)`, unless `x` is a part of the leaf: then `make(whole shape)` cut to
      the elements `x` holds, shaped like `x`.
    """
    parts = _PARTS.get()
    if parts is None:
        return make(tuple(x.shape))
    with jax.named_scope(LEAF_SCOPE):
        return parts.leaf_part(path, x, make)


def leaf_size(path: Any, x: jax.Array) -> int:
    """The number of elements of the whole leaf at `path` (a mean's divisor), where the rule holds `x` of it.

    Args:
      path: the leaf's key path (`update_rule(..., paths=True)` gives it to the formula).
      x: what the rule holds of the leaf: the leaf itself, or a part of it.

    Returns:
      `x.size`, unless `x` is a part of the leaf: then the whole leaf's size.
    """
    parts = _PARTS.get()
    return x.size if parts is None else parts.leaf_size(path, x)


def leaf_shape(path: Any, x: Any) -> tuple[int, ...] | None:
    """The shape of the whole leaf at `path`, where the rule holds `x` of it: `x`'s own shape, unless `x` is
    a part of the leaf; None for an `x` that is not one of the leaf at `path` (a combinator between the
    parts' holder and the rule changed the tree)."""
    parts = _PARTS.get()
    return tuple(jax.numpy.shape(x)) if parts is None else parts.leaf_shape(path, x)


def whole_shape(path: Any, x: Any) -> tuple[int, ...]:
    """`leaf_shape`, for a rule whose statistics follow it (a factored second moment): where `x` is not a
    part of the leaf at `path` (a combinator inside `sharded_state` changed the tree), the error that
    says so, not a guess from the part's own shape.

    Raises:
      ValueError: for a part of a tree that does not match the parameters'.
    """
    shape = leaf_shape(path, x)
    if shape is None:
        where = jax.tree_util.keystr(tuple(path)) or "<root>"
        raise ValueError(
            f"`sharded_state`: a rule reads the shape of the whole parameter at {where}, but the tree it was "
            "given does not match the parameters' (a combinator inside `sharded_state` changed its "
            "structure); put that rule directly in `sharded_state`'s chain."
        )
    return shape


def in_leaf(path: Any, x: jax.Array, fill: float = 0.0) -> jax.Array:
    """`x`, a part of the whole leaf at `path`, in an array shaped like the leaf: `x` itself unless it is a
    part; then `fill` at the elements of the other parts. A reduction of it is this part's share of the
    leaf's (a partial result for `total`; the check of `sharded_state` refuses any other use of it)."""
    parts = _PARTS.get()
    if parts is None:
        return x
    with jax.named_scope(SHARE_SCOPE):
        return parts.in_leaf(path, x, fill)


def _reduced_over_axes(
    path: Any, x: jax.Array, axes: Sequence[Any], op: str, fill: float, reduce: Callable[..., Any]
) -> tuple[list[jax.Array], tuple[int, ...]]:
    """`reduce(leaf, axis=a)` of the whole leaf at `path` for each `a` of `axes`, combined by `op` over the
    parts (one `total`); and the leaf's shape."""
    whole = in_leaf(path, x, fill)
    return list(total(tuple(reduce(whole, axis=a) for a in axes), op)), tuple(whole.shape)


def leaf_means(path: Any, x: jax.Array, axes: Sequence[int | None]) -> list[jax.Array]:
    """The means of the whole leaf at `path` over each axis of `axes`, where the rule holds `x` of it:
    `jnp.mean(leaf, axis=a)` for each, value for value (a 16-bit float summed in float32), the replicas'
    partial sums combined by one `total`.

    Args:
      path: the leaf's key path (`update_rule(..., paths=True)` gives it to the formula).
      x: what the rule holds of the leaf: the leaf itself, or a part of it.
      axes: axes of the whole leaf (`leaf_shape`), each reduced on its own; None: all of them.

    Returns:
      One array per axis: the whole leaf's mean over that axis, in `x`'s dtype.
    """
    if _PARTS.get() is None:  # the leaf itself: `jnp.mean`'s own program (eagerly too, optax's bits)
        return [jnp.mean(x, axis=a) for a in axes]
    dtype = jnp.result_type(x)
    wide = jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) else dtype  # as `jnp.mean` sums
    sums, shape = _reduced_over_axes(
        path, x, axes, "sum", 0.0, lambda y, axis: jnp.sum(y, axis=axis, dtype=wide)
    )
    counts = [math.prod(shape) if a is None else shape[a] for a in axes]
    return [jax.lax.div(s, jnp.asarray(c, wide)).astype(dtype) for s, c in zip(sums, counts, strict=True)]


def leaf_maxima(path: Any, x: jax.Array, axes: Sequence[tuple[int, ...]]) -> list[jax.Array]:
    """The maxima of the whole leaf at `path` over each tuple of axes in `axes` (`jnp.max(leaf, axis=a)`),
    where the rule holds `x` of it (0 for a leaf of no element); the replicas' partial maxima combined by
    one `total`."""
    initial = 0.0 if x.size == 0 else None
    maxima, _ = _reduced_over_axes(
        path, x, axes, "max", -float("inf"), lambda y, axis: jnp.max(y, axis=axis, initial=initial)
    )
    return maxima


@contextlib.contextmanager
def holding(parts: Parts) -> Iterator[None]:
    """Within the block, `total` and `leaf_part` are run by `parts` (the rule is given parts of leaves)."""
    token = _PARTS.set(parts)
    try:
        yield
    finally:
        _PARTS.reset(token)
