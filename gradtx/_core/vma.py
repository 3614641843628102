"""Typing of values under `jax.shard_map(..., check_vma=True)`: which mesh axes a value varies over.

Type casts only: nothing here moves data between devices (the collectives live in
`gradtx.parallel`). Outside `shard_map` every function here is the identity.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Callable

import jax
import numpy as np


def varying(x: Any) -> frozenset:
    """The mesh axes over which the value `x` varies (its type's `vma`; empty when untyped)."""
    if not isinstance(x, (jax.Array, np.ndarray, np.generic, numbers.Number)):
        return frozenset()
    aval = jax.typeof(x)
    vma = getattr(aval, "vma", None)
    if vma is None:
        mat = getattr(aval, "mat", None)
        vma = getattr(mat, "varying", frozenset())
    return frozenset(vma or ())


def typed_like(new: Any, old: Any) -> Any:
    """`new` typed to vary over every mesh axis `old` varies over (a type cast; see `typed_like_params`).

    For a state leaf that `update` recomputes from invariant inputs only (not from its own
    previous value), so that it keeps the type `init` gave it.
    """
    return _vary_over(new, varying(old))


def _vary_over(x: jax.Array, axes: frozenset) -> jax.Array:
    """`x` typed as varying over `axes` (those it already varies over are left alone)."""
    missing = tuple(sorted(axes - varying(x), key=str))
    return jax.lax.pcast(x, missing, to="varying") if missing else x


def typed_like_params(init: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`init` whose state varies over every mesh axis the params vary over.

    Under `jax.shard_map(..., check_vma=True)`, per-replica params (local SGD, model
    averaging) give per-replica updates, so `update` returns a state that varies over the
    replica axis. Typing the initial state the same way keeps `init`'s and `update`'s
    state types equal, as `lax.scan` / `while_loop` carries need. A type cast, no data
    moves; outside `shard_map` this is `init` itself.
    """

    @functools.wraps(init)
    def typed_init(params):
        state = init(params)
        axes = frozenset().union(*map(varying, jax.tree.leaves(params)))
        if not axes:
            return state
        return jax.tree.map(lambda x: _vary_over(x, axes) if isinstance(x, jax.Array) else x, state)

    typed_init._typed_like_params = True  # type: ignore[attr-defined]
    return typed_init


def is_typed(init: Callable[[Any], Any]) -> bool:
    """True for an `init` that `typed_like_params` already wraps."""
    return getattr(init, "_typed_like_params", False)
