"""Keeping an inner state beside the one the inner transform returns (wrappers that skip steps)."""

from __future__ import annotations

from typing import Any

import jax

from gradtx._core import protocol as _protocol
from gradtx._core import walk as _walk


def as_returned(fn: str, kept: Any, returned: Any) -> Any:
    """The inner state `kept` (the one given to this step) in the containers of `returned`, the state
    the inner transform returns (arrays or their `jax.eval_shape`).

    A wrapper that keeps the inner state at a skipped step (`apply_if_finite`,
    `accumulate_gradients`, `conditionally_transform`) selects between the two, leaf by leaf.
    An inner transform may return other containers than it was given, with the same key paths:
    `inject_hyperparams` returns its `Hyperparams` dict where `optax.tree.set(state,
    learning_rate=...)` or `state._replace(hyperparams={...})` gave it a plain dict. The kept
    state takes the returned containers (its leaves as they are), so both sides of the
    selection have one structure and the step's state is the inner transform's.

    Raises:
      TreeMismatchError: when the key paths differ (the inner transform changed its state's
        shape of tree, not just a container type), naming both trees.
    """
    returned_def: Any = jax.tree.structure(returned)  # a PyTreeDef
    if jax.tree.structure(kept) == returned_def:
        return kept
    if _walk.key_paths(kept) != _walk.key_paths(returned):
        raise _protocol.tree_mismatch_error(
            fn,
            "the inner state given to the step",
            kept,
            "the inner state the inner transform returned",
            returned,
            want="must have the same key paths",
        )
    return returned_def.unflatten(jax.tree.leaves(kept))
