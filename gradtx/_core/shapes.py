"""Trees checked where a step is traced: Python numbers as arrays, shapes of updates, params and state slots.

What `_base.api` runs on every step of the transform a public factory returns (no run-time
cost: shapes are static).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import protocol as _protocol
from gradtx._core.walk import is_row_sparse, key_paths
from gradtx._core.walk import is_update_leaf as _is_update_leaf


def numbers_as_arrays(tree: Any) -> Any:
    """`tree` with its Python-number leaves (`{"w": 1.0}`) as 0-d arrays, as optax's rules see them
    (`jnp.asarray`: weakly typed, float32 for a float); `tree` itself when it has none."""
    treedef: Any
    leaves, treedef = jax.tree.flatten(tree, is_leaf=_is_update_leaf)
    if not any(isinstance(x, (int, float, complex)) for x in leaves):
        return tree
    return treedef.unflatten([jnp.asarray(x) if isinstance(x, (int, float, complex)) else x for x in leaves])


def _shape_of(x: Any) -> tuple[int, ...] | None:
    """A leaf's shape (a row-sparse gradient's dense shape), or None for `None` and non-arrays."""
    if x is None:
        return None
    if is_row_sparse(x):
        return tuple(x.dense_shape)
    shape = getattr(x, "shape", None)
    return None if shape is None else tuple(shape)


def check_shapes(fn_name: str, updates: Any, params: Any = None, state: Any = None) -> None:
    """Refuse updates, and state slots, whose leaf shapes differ from the params' (at trace time).

    Every update leaf must have its parameter's shape (a row-sparse one by its dense shape).
    In `state` (a NamedTuple), every slot field (annotated `Updates`) with the tree structure
    of the updates must have the update's shape leaf by leaf, whatever its rank (a state made
    for params of another rank would otherwise broadcast). A state class whose slots are not
    all shaped like the params says so: `slots_shaped_like_params = ("m",)` names the fields
    that are (GGT's window `[n, *shape]` and NovoGrad's per-leaf scalars are not), `False`
    none (Adafactor's placeholders and row/column statistics). Slot fields of another tree
    structure (per-dimension statistics) are left alone.
    Shapes are static, so this costs nothing at run time; key paths are computed only for
    the error.

    Raises:
      ValueError: naming the key path, both shapes and what to do.
    """
    treedef: Any
    leaves, treedef = jax.tree.flatten(updates, is_leaf=_is_update_leaf)
    shapes = [_shape_of(x) for x in leaves]
    if params is not None:
        try:
            flat_params = treedef.flatten_up_to(params)
        except (ValueError, TypeError):
            raise _protocol.tree_mismatch_error(fn_name, "updates", updates, "params", params) from None
        for i, (shape, p) in enumerate(zip(shapes, flat_params, strict=True)):
            p_shape = _shape_of(p)
            if shape is not None and p_shape is not None and shape != p_shape:
                raise ValueError(
                    f"`{fn_name}`: the gradient at {key_paths(updates)[i]} has shape {shape}, but the "
                    f"parameter there has shape {p_shape}; compute the gradients of these parameters "
                    f"(leaf by leaf shapes must agree)."
                )
    _check_state_slots(fn_name, updates, treedef, shapes, state, depth=0)


def _check_state_slots(
    fn_name: str, updates: Any, treedef: Any, shapes: list[Any], state: Any, depth: int
) -> None:
    """`check_shapes` on `state`'s slot fields, and on the states it holds (a chain's tuple, a wrapper's
    inner state, a `named_chain`'s dict), down to a few levels; a state class may say its inner
    states are of other shapes (`inner_states_shaped_like_params = False`: ZeRO's shards)."""
    if depth > 8:
        return
    if isinstance(state, dict):
        for value in state.values():
            if isinstance(value, (tuple, dict)):
                _check_state_slots(fn_name, updates, treedef, shapes, value, depth + 1)
        return
    if not isinstance(state, tuple):
        return
    if not hasattr(state, "_fields"):
        for value in state:
            _check_state_slots(fn_name, updates, treedef, shapes, value, depth + 1)
        return
    shaped_like = getattr(type(state), "slots_shaped_like_params", True)
    for field in state._fields:
        value = getattr(state, field)
        mark = _protocol.mark_of(type(state), field)
        if mark is not _protocol.SLOT:
            if (
                mark is None
                and isinstance(value, (tuple, dict))
                and getattr(type(state), "inner_states_shaped_like_params", True)
            ):
                _check_state_slots(fn_name, updates, treedef, shapes, value, depth + 1)
            continue
        if shaped_like is not True and (shaped_like is False or field not in shaped_like):
            continue
        try:
            flat_slot = treedef.flatten_up_to(value)
        except (ValueError, TypeError):
            continue
        for i, (shape, s) in enumerate(zip(shapes, flat_slot, strict=True)):
            s_shape = _shape_of(s)
            if shape is not None and s_shape is not None and s_shape != shape:
                where = "state's" if depth == 0 else f"state's {type(state).__name__}, its"
                raise ValueError(
                    f"`{fn_name}`: the gradient at {key_paths(updates)[i]} has shape {shape}, but the "
                    f"{where} slot `{field}` there has shape {s_shape}; pass a state made by `init` from "
                    f"params shaped like these gradients."
                )
