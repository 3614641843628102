"""TF's slots by name: `slot_names`, `get_slot`, `slots` on any state (chains, partitions, wrappers, optax's).

A *slot* is a field of a transform's state that holds one array per parameter: the
fields a state class annotates with the type `Updates` (gradtx's `m`, `v`, `accumulator`,
`linear`, `momentum`, `rms`, ...; optax's `mu`, `nu`, `trace`, ..., annotated with optax's
`Updates`), read by `_protocol.mark_of` from the evaluated annotation, not its spelling.
Counters and scalar accumulators (`count`, `beta1_power`) are not slots. The walk goes
through tuples (`chain`), dicts (`named_chain`, `partition`) and wrapper states.

Flax NNX states are read as their values: `nnx.Optimizer.opt_state` (leaves wrapped in
`Variable`s) as it is, and a state whose types were lost (`nnx.state(optimizer)`, a restored
dict) by its keys: the slot `name` is what lies under the key `name`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Iterator

import jax

from gradtx import packing
from gradtx._core import lowbit as _lowbit
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol


def _is_state(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _walk(state: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """(slot name, where it lives, slot tree) for every slot in `state`."""
    if _is_state(state):
        for field in state._fields:
            value = getattr(state, field)
            mark = _protocol.mark_of(type(state), field)
            if mark is _protocol.SLOT_DICT:  # named slots in one dict (per_leaf)
                for key, tree in value.items():
                    yield key, f"{where}.{field}[{key!r}]", tree
            elif mark is _protocol.SLOT:  # a field annotated `Updates` (gradtx's or optax's)
                value = packing.unpack(_lowbit.dequantized(value))  # leaf by leaf, as values
                if value is not None:
                    yield field, f"{where}.{field}", value
            else:
                yield from _walk(value, f"{where}.{field}")
    elif isinstance(state, (tuple, list)):
        for i, s in enumerate(state):
            yield from _walk(s, f"{where}[{i}]")
    elif isinstance(state, dict):
        for k, s in state.items():
            yield from _walk(s, f"{where}[{k!r}]")


def _under_key(state: Any, name: str, where: str) -> Iterator[tuple[str, Any]]:
    """(where, tree) for every subtree under the key `name` of a state without its types (NNX's `State`)."""
    if isinstance(state, Mapping):
        for k, s in state.items():
            if k == name:
                yield f"{where}[{k!r}]", s
            else:
                yield from _under_key(s, name, f"{where}[{k!r}]")
    elif isinstance(state, (tuple, list)):
        for i, s in enumerate(state):
            yield from _under_key(s, name, f"{where}[{i}]")


_SHOWN = 5
"""At most this many names in an error message."""


def _some(given: str, names: list[str], noun: str) -> str:
    """`names` for an error message: all of them when few, else their count and the closest to `given`."""
    if len(names) <= _SHOWN:
        return repr(names)
    close = difflib.get_close_matches(given, names, n=_SHOWN, cutoff=0.5)
    return f"{len(names)} {noun}, " + (f"the closest: {close}" if close else f"the first: {names[:_SHOWN]}")


def _merge(name: str, found: list[tuple[str, Any]]) -> Any:
    """One tree from slots of the same name whose non-None leaves do not overlap (e.g. `partition`)."""
    trees = [t for _, t in found]
    is_leaf = lambda x: x is None  # noqa: E731
    treedefs = {jax.tree.structure(t, is_leaf=is_leaf) for t in trees}
    if len(treedefs) == 1:
        columns = list(zip(*(jax.tree.leaves(t, is_leaf=is_leaf) for t in trees), strict=True))
        if all(sum(x is not None for x in col) <= 1 for col in columns):
            merged = [next((x for x in col if x is not None), None) for col in columns]
            return jax.tree.unflatten(treedefs.pop(), merged)
    raise ValueError(
        f"`get_slot`: the slot {name!r} exists in several places ({', '.join(w for w, _ in found)}); "
        f"pass the part of the state you mean, e.g. `get_slot(state[0], {name!r})`."
    )


def slot_names(state: Any) -> list[str]:
    """The names of the slots in `state`, sorted (TF's `Optimizer.get_slot_names()`).

    Args:
      state: an optimizer state (of a chain, wrapper or alias, packed or not).

    Returns:
      The slot names, each once, sorted.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.slot_names(gradtx.rmsprop(0.1, centered=True).init({"w": jnp.zeros(2)}))
        ['mg', 'momentum', 'rms']
    """
    return sorted({name for name, _, _ in _walk(packing.without_variables(state), "state")})


def get_slot(state: Any, name: str, path: Any = None) -> Any:
    """The slot `name`: the whole tree, or, with `path`, one parameter's slot (TF's `get_slot(var, name)`).

    Args:
      state: an optimizer state (any nesting of chains, partitions and wrappers; Flax NNX's
        `nnx.Optimizer.opt_state` or `nnx.state(optimizer)` too).
      name: the slot name (`"m"`, `"accumulator"`, ...; see `slot_names`).
      path: a parameter's key path, as a slash-separated string (``"dense/kernel"``) or a
        tuple of keys (``("dense", "kernel")``), with or without NNX's trailing ``"/value"``;
        None for the whole tree.

    Returns:
      The slot tree (with the structure of the params), or one array.

    Raises:
      KeyError: for an unknown slot name or path (the message names the closest known ones).
      ValueError: when two transforms of the state keep overlapping slots of that name.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.adagrad(0.1))
        >>> state = tx.init({"dense": {"kernel": jnp.zeros(2)}})
        >>> gradtx.get_slot(state, "accumulator", "dense/kernel")
        Array([0.1, 0.1], dtype=float32)
    """
    state = packing.without_variables(state)
    names = slot_names(state)
    if names:
        found = [(where, tree) for n, where, tree in _walk(state, "state") if n == name]
    else:  # no state types (`nnx.state(optimizer)`, a restored dict): the slot lies under the key `name`
        found = list(_under_key(state, name, "state"))
    if not found:
        has = _some(name, names, "slots") if names else f"no slots (nor a key {name!r})"
        raise _protocol.UnknownNameError(f"`get_slot`: no slot named {name!r}; the state has {has}.")
    tree = found[0][1] if len(found) == 1 else _merge(name, found)
    if path is None:
        return tree
    want = path if isinstance(path, str) else "/".join(str(p) for p in path)
    leaves = {_masks.path_str(p): leaf for p, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}
    for key in (want, want.removesuffix("/value")):  # NNX's key paths end in `/value`
        if key in leaves:
            return leaves[key]
    raise _protocol.UnknownNameError(
        f"`get_slot`: the slot {name!r} has no parameter {want!r}; it has "
        f"{_some(want, list(leaves), 'parameters')}."
    )


def slots(state: Any) -> dict[str, Any]:
    """Every slot of `state` by name: `{name: tree}`.

    Args:
      state: an optimizer state (of a chain, wrapper or alias, packed or not).

    Returns:
      A dict from slot name to its tree (unpacked: shaped like the params).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> sorted(gradtx.slots(gradtx.adam().init({"w": jnp.zeros(3)})))
        ['m', 'v']
    """
    return {name: get_slot(state, name) for name in slot_names(state)}
