"""Random trees: a key per leaf, noise shaped like a tree, and keys unwrapped for comparison."""

from __future__ import annotations

import inspect
from typing import Any, Callable

import jax


def split_key_like(rng_key: jax.Array, target_tree: Any) -> Any:
    """One key per leaf of `target_tree`: `jax.random.split(rng_key, number of leaves)`, in its structure.

    Args:
      rng_key: the key to split.
      target_tree: the tree whose structure the keys take.

    Returns:
      A tree of keys with the structure of `target_tree`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> keys = gradtx.tree.split_key_like(jax.random.key(0), {"a": jnp.ones(2), "b": jnp.ones(3)})
        >>> sorted(keys)
        ['a', 'b']
    """
    treedef: Any = jax.tree.structure(target_tree)  # a PyTreeDef
    return jax.tree.unflatten(treedef, jax.random.split(rng_key, treedef.num_leaves))


def _placing(sampler: Callable[..., Any]) -> Callable[..., Any]:
    """`sampler` taking `out_sharding=` (a sampler without it places its values itself: it is dropped)."""
    if "out_sharding" in inspect.signature(sampler).parameters:
        return sampler
    return lambda key, shape, dtype, *, out_sharding: sampler(key, shape, dtype)


def random_like(
    rng_key: jax.Array,
    target_tree: Any,
    sampler: Callable[..., Any] = jax.random.normal,
    dtype: Any = None,
) -> Any:
    """A tree of random values shaped like `target_tree`: each leaf drawn by `sampler` with its own key.

    The keys are `split_key_like(rng_key, target_tree)`. Each leaf is
    `sampler(key, leaf.shape, dtype or leaf.dtype)`, placed like the leaf where `sampler` takes
    `out_sharding` (JAX's samplers do).

    Args:
      rng_key: the key.
      target_tree: the tree whose structure and shapes the result takes (array leaves).
      sampler: `sampler(key, shape, dtype)` (or with `out_sharding=`): a distribution, by
        default `jax.random.normal`.
      dtype: the dtype of every leaf of the result, or None for each leaf's own.

    Returns:
      A tree with the structure of `target_tree`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> noise = gradtx.tree.random_like(jax.random.key(0), {"w": jnp.zeros((2, 3))})
        >>> noise["w"].shape, noise["w"].dtype
        ((2, 3), dtype('float32'))
    """
    keys, draw = split_key_like(rng_key, target_tree), _placing(sampler)
    return jax.tree.map(
        lambda leaf, key: draw(key, leaf.shape, dtype or leaf.dtype, out_sharding=jax.typeof(leaf).sharding),
        target_tree,
        keys,
    )


def unwrap_random_key_data(input_tree: Any) -> Any:
    """Every typed key (`jax.random.key`) replaced by its raw data (`jax.random.key_data`), for comparisons.

    Args:
      input_tree: a pytree of arrays and keys.

    Returns:
      A tree with the structure of `input_tree`: keys as uint32 arrays, other leaves as they are.

    Example:
        >>> import jax, gradtx
        >>> gradtx.tree.unwrap_random_key_data({"key": jax.random.key(0)})["key"].dtype
        dtype('uint32')
    """

    def unwrap(x: Any) -> Any:
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(x)
        return x

    return jax.tree.map(unwrap, input_tree)
