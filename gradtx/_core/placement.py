"""Slots placed like their parameters: the one place that creates optimizer state from params.

A slot must live where its parameter lives, or a pod holds the whole optimizer state on
every device. How a parameter's placement is known depends on how `init` is called:

- eagerly, on a committed `jax.Array` (or a `jax.ShapeDtypeStruct` with a sharding): its
  `.sharding`, given to the new array;
- under `jax.jit` with Explicit mesh axes (`jax.set_mesh`): the sharding in the tracer's
  type, which an array computed from the parameter inherits;
- under `jax.jit` with Auto axes: nothing at trace time; GSPMD propagates the parameter's
  sharding to arrays computed from it;
- under `jax.shard_map`: the axes the parameter varies over (its type's `vma`).

So a traced slot is written as `where(False, param, value)`: it depends on the parameter in
its type and in the dataflow (placed, typed and varying like it in every mode), and XLA
folds it to a constant fill, so the compiled `init` neither reads the parameter nor moves
data. Slots of other shapes (one entry per row, a stack of windows) are placed like the
parameter along the axes they keep.

Under Explicit axes a computation must also say where its results live when the types do not
decide it: a contraction over a sharded dimension, or a matrix function (an SVD, Newton-Schulz)
that needs a whole matrix. The matrix rules say it with three helpers, each the identity
outside Explicit mode (Auto axes, `shard_map`, one device), so their formulas stay formulas
and GSPMD still chooses for Auto axes: `whole(x)` gathers `x` onto every device,
`placed_like(y, p)` puts a result back in `p`'s sharding (a local slice when `y` is whole),
and `whole_sharding(x)` is the `out_sharding=` of a contraction whose result is to be whole
(partial sums, then one all-reduce). A `lax.cond` branch that makes zeros for a computed
result gives them its type: `zeros_of(t)` of the result's `eval_shape`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def _dtype(p: Any, dtype: Any) -> Any:
    return jnp.dtype(dtype) if dtype is not None else jnp.result_type(p)


def _named(p: Any) -> NamedSharding | None:
    """`p`'s `NamedSharding` when known without tracing: a committed array's or a `ShapeDtypeStruct`'s."""
    sharding = getattr(p, "sharding", None)
    return sharding if isinstance(sharding, NamedSharding) else None


def _typed(p: jax.Array) -> NamedSharding | None:
    """The sharding in a tracer's type (jit under Explicit mesh axes), when it names mesh axes."""
    sharding = getattr(jax.typeof(p), "sharding", None)
    if isinstance(sharding, NamedSharding) and any(s is not None for s in sharding.spec):
        return sharding
    return None


def _spec(sharding: NamedSharding, ndim: int) -> tuple[Any, ...]:
    return tuple(sharding.spec) + (None,) * (ndim - len(sharding.spec))


def _if_explicit(sharding: Any) -> NamedSharding | None:
    """`sharding` if it is a type's sharding on a mesh with Explicit axes (sharding in types), else None."""
    if isinstance(sharding, NamedSharding) and AxisType.Explicit in sharding.mesh.axis_types:
        return sharding
    return None


def explicit_sharding(x: Any) -> NamedSharding | None:
    """The sharding in the type of `x` (an array, a tracer, a `jax.ShapeDtypeStruct`) under Explicit axes."""
    if isinstance(x, jax.ShapeDtypeStruct):
        return _if_explicit(x.sharding)
    if isinstance(x, jax.Array):
        return _if_explicit(getattr(jax.typeof(x), "sharding", None))
    return None


def whole_sharding(x: Any) -> NamedSharding | None:
    """The `out_sharding` of a contraction of `x` whose result is whole on every device, under Explicit
    axes (partial sums, then one all-reduce); None otherwise (the contraction's own rule, GSPMD's choice).

    Example: `jnp.tensordot(a, b, axes, out_sharding=whole_sharding(a))`.
    """
    sharding = explicit_sharding(x)
    return None if sharding is None else sharding.update(spec=P())


def whole(x: jax.Array) -> jax.Array:
    """`x` gathered whole onto every device under Explicit axes (one all-gather); `x` itself otherwise.

    For what needs a whole matrix (an SVD, a Newton-Schulz iteration); `placed_like` puts the
    result back.
    """
    sharding = explicit_sharding(x)
    if sharding is None or all(s is None for s in sharding.spec):
        return x
    return jax.sharding.reshard(x, sharding.update(spec=P()))


def placed_like(y: jax.Array, p: Any) -> jax.Array:
    """`y` in `p`'s sharding under Explicit axes (a local slice when `y` is whole); `y` itself otherwise.

    Args:
      y: a result shaped like `p`.
      p: the array whose placement `y` takes (a parameter, an update, a slot).

    Returns:
      `y`, placed like `p`.
    """
    sharding = explicit_sharding(p)
    if sharding is None:
        return y
    want = _spec(sharding, jnp.ndim(p))
    got = explicit_sharding(y)
    if got is not None and _spec(got, jnp.ndim(y)) == want:
        return y
    return jax.sharding.reshard(y, sharding.update(spec=P(*want)))


def take_rows(table: Any, index: jax.Array) -> jax.Array:
    """`table`'s rows `index` (axis 0; zeros for an index past the end): a row-sparse step's gather. Under
    Explicit axes the rows are whole along axis 0 and keep `table`'s sharding of its other axes."""
    table = jnp.asarray(table)
    sharding = explicit_sharding(table)
    out = None if sharding is None else sharding.update(spec=P(None, *_spec(sharding, table.ndim)[1:]))
    return table.at[index].get(mode="fill", fill_value=0, out_sharding=out)


def put_rows(table: Any, index: jax.Array, rows: jax.Array, *, add: bool = False) -> jax.Array:
    """`table` with its rows `index` set to `rows` (or, `add`, increased by them; an index past the end
    dropped), placed as `table` is: a row-sparse step's scatter."""
    table = jnp.asarray(table)
    at, out = table.at[index], explicit_sharding(table)
    return (at.add if add else at.set)(rows.astype(table.dtype), mode="drop", out_sharding=out)


class Flattened(NamedTuple):
    """The shardings of the steps that flatten an array into blocks (`flattened`)."""

    local: NamedSharding  # the array's, with only the first flattened axis sharded
    flat: NamedSharding  # the flattened view's
    blocks: NamedSharding  # the flattened view's where each device holds whole blocks, else whole along it
    codes: NamedSharding  # the flattened view's, or whole along it where pairs of codes do not divide


def flattened(x: Any, keep: int, block: int, *, pairs: bool = False) -> Flattened | None:
    """Under Explicit axes, for `x` whose axes after the first `keep` are flattened and cut into blocks of
    `block` elements (a low-bit slot of rows shorter than a block) and sharded: where each step runs. None
    otherwise (the reshapes' own rules place them).

    Only the first flattened axis stays sharded, so that flattening is local (an all-gather over the
    others' mesh axes); where a device's part of the flattened view ends inside a block, the view is
    gathered whole along it (one all-gather), so that each block's reduction is one device's; codes kept
    two to a byte (`pairs`) stay split only where the pairs divide over the devices.
    """
    sharding = explicit_sharding(x)
    if sharding is None or x.ndim - keep < 2:
        return None
    spec = _spec(sharding, x.ndim)
    head, first = spec[:keep], spec[keep]
    if not any(spec[keep:]):
        return None
    names = () if first is None else (first,) if isinstance(first, str) else tuple(first)
    devices = math.prod(sharding.mesh.shape[a] for a in names)
    trail = math.prod(x.shape[keep:])
    flat, whole = P(*head, first), P(*head, None)
    whole_blocks = first is not None and trail % (devices * block) == 0
    divided = not pairs or (trail // 2) % devices == 0
    return Flattened(
        sharding.update(spec=P(*head, first, *(None,) * (x.ndim - keep - 1))),
        sharding.update(spec=flat),
        sharding.update(spec=flat if whole_blocks else whole),
        sharding.update(spec=flat if divided else whole),
    )


def eval_shape(fn: Any, *args: Any) -> Any:
    """`jax.eval_shape(fn, *args)` whose outputs keep their sharding types under Explicit axes.

    (`jax.eval_shape` drops them on a mesh that mixes Explicit and Auto axes.)
    """
    closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
    leaves, treedef = jax.tree.flatten(shapes)
    typed = []
    for leaf, aval in zip(leaves, closed.out_avals, strict=True):
        sharding = _if_explicit(getattr(aval, "sharding", None))
        typed.append(leaf if sharding is None else leaf.update(sharding=sharding))
    return jax.tree.unflatten(treedef, typed)


def zeros_of(t: Any) -> jax.Array:
    """Zeros of the abstract value `t` (a `jax.ShapeDtypeStruct` from `eval_shape` inside a trace), with the
    sharding in its type under Explicit axes: the branches of a `lax.cond` must agree on it."""
    return jnp.zeros(t.shape, t.dtype, out_sharding=explicit_sharding(t))


def filled(p: Any, value: Any, dtype: Any = None) -> jax.Array:
    """An array shaped like the parameter `p`, filled with `value`, placed like `p` in every mode.

    Args:
      p: the parameter: an array, a tracer or a `jax.ShapeDtypeStruct`.
      value: the fill value (a number or a scalar array).
      dtype: the slot's dtype (default: `p`'s).

    Returns:
      The slot.
    """
    dtype = _dtype(p, dtype)
    if isinstance(p, jax.core.Tracer):
        return jnp.where(False, p.astype(dtype), jnp.asarray(value, dtype))
    if isinstance(p, jax.Array):
        return jnp.full_like(p, value, dtype)  # keeps p's sharding
    return jnp.full(jnp.shape(p), value, dtype, device=getattr(p, "sharding", None))


def full_like(tree: Any, value: Any, dtype: Any = None) -> Any:
    """`filled` over a tree of parameters: every slot placed like its parameter.

    Works from shapes alone, so `init` accepts `jax.ShapeDtypeStruct` leaves.
    """
    return jax.tree.map(lambda p: filled(p, value, dtype), tree)


def zeros_like(tree: Any, dtype: Any = None) -> Any:
    """A tree of zeros shaped and placed like `tree` (see `full_like`)."""
    return full_like(tree, 0, dtype)


def reduced(p: Any, keep: tuple[int, ...], dtype: Any = None) -> jax.Array:
    """Zeros shaped like `p` along the axes `keep` only, placed like `p` along them.

    A statistic with one entry per row (or per column, or per index of one axis) of a
    sharded parameter is sharded like that axis; `keep=()` gives a scalar on `p`'s devices.
    Works from shapes alone (`jax.ShapeDtypeStruct`, tracers).
    """
    dtype = _dtype(p, dtype)
    shape = tuple(jnp.shape(p)[i] for i in keep)
    if isinstance(p, jax.core.Tracer):
        typed = _typed(p)
        if typed is not None:  # Explicit axes: the kept axes' specs, in the type
            spec = _spec(typed, p.ndim)
            return jnp.zeros(shape, dtype, out_sharding=typed.update(spec=P(*(spec[i] for i in keep))))
        dropped = tuple(i for i in range(p.ndim) if i not in keep)
        source = jnp.max(p, axis=dropped) if dropped and p.size else jnp.zeros(shape, p.dtype)
        return jnp.where(
            False, source.astype(dtype), jnp.zeros((), dtype)
        )  # Auto axes, shard_map: propagated
    sharding = _named(p)
    if sharding is not None:
        spec = _spec(sharding, len(jnp.shape(p)))
        return jnp.zeros(shape, dtype, device=NamedSharding(sharding.mesh, P(*(spec[i] for i in keep))))
    sharding = getattr(p, "sharding", None)
    replicated = sharding is not None and sharding.is_fully_replicated
    committed = getattr(p, "committed", True)  # an uncommitted param's slots stay uncommitted, as `filled`'s
    return jnp.zeros(shape, dtype, device=sharding if replicated and committed else None)


def replicated_on(p: Any, shape: tuple[int, ...], dtype: Any = None) -> jax.Array:
    """Zeros of `shape` on `p`'s devices, replicated there: a statistic whose axes are not `p`'s (a
    projection, a block's moment, the whole leaf's statistics for ZeRO's slice of it)."""
    return jnp.broadcast_to(reduced(p, (), dtype), shape)


def stacked(p: Any, n: int, dtype: Any = None) -> jax.Array:
    """Zeros of shape `(n, *p.shape)` (a window of slots), placed like `p` along its own axes."""
    dtype = _dtype(p, dtype)
    shape = (n, *jnp.shape(p))
    if isinstance(p, jax.core.Tracer):
        return jnp.where(False, jnp.broadcast_to(p.astype(dtype), shape), jnp.zeros((), dtype))
    sharding = _named(p)
    if sharding is not None:
        spec = _spec(sharding, len(jnp.shape(p)))
        return jnp.zeros(shape, dtype, device=NamedSharding(sharding.mesh, P(None, *spec)))
    sharding = getattr(p, "sharding", None)
    replicated = sharding is not None and sharding.is_fully_replicated
    committed = getattr(p, "committed", True)  # an uncommitted param's slots stay uncommitted, as `filled`'s
    return jnp.zeros(shape, dtype, device=sharding if replicated and committed else None)
