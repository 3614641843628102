"""Control flow that stays cheap when a step runs eagerly."""

from __future__ import annotations

from typing import Any, Callable

import jax


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any) -> Any:
    """`jax.lax.cond`, or, for a concrete `pred` (a step run eagerly), the branch it picks, called at once.

    Eagerly, `lax.cond` traces, lowers and compiles both branches at every call (its branches are new
    functions each step); the branch called directly runs op by op, as the rest of an eager step does,
    and the branch not taken costs nothing. Under a trace (`jit`, `grad`, `vmap`, `shard_map`) it is
    `lax.cond`.
    """
    if isinstance(pred, jax.core.Tracer):
        return jax.lax.cond(pred, true_fn, false_fn, *operands)
    return true_fn(*operands) if bool(pred) else false_fn(*operands)
