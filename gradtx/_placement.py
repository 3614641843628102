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
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
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
