"""Reading and replacing values of a state by name: `get`, `get_all_with_path`, `set` (optax's walk).

A *name* is a NamedTuple's field (`count`, `mu`, `inner_state`), a dict key (the
`hyperparams` of `inject_hyperparams`: `learning_rate`), or a NamedTuple's class name
(`ScaleByAdamState`: the whole tuple). The walk and the paths are optax's, so a program gets
the values, paths and errors `optax.tree` gives it: a field's path entry is a `NamedTupleKey`
(its tuple's class and the field; `jax.tree_util.keystr` prints `ScaleByAdamState.count`), a
`filtering(path, value)` callable sees those paths, and `set` rebuilds a matched dict as a
plain dict (every gradtx wrapper takes that in place of its `Hyperparams`).
"""

from __future__ import annotations

import builtins
import dataclasses
from typing import Any, Callable

import jax

from gradtx import slots
from gradtx._core import protocol as _protocol

KeyPath = tuple[Any, ...]
Filtering = Callable[[KeyPath, Any], bool]


@dataclasses.dataclass(frozen=True)
class NamedTupleKey:
    """A path entry for a NamedTuple's field that also names the tuple's class (optax's `NamedTupleKey`).

    Attributes:
      tuple_name: the NamedTuple's class name (``"ScaleByAdamState"``).
      name: the field (``"count"``).
    """

    tuple_name: str
    name: str

    def __str__(self) -> str:
        return f"{self.tuple_name}.{self.name}"


class _MultipleValuesError(KeyError):
    """A name found at several places where one was asked for (a KeyError, as optax raises)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _is_named_tuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _has_any(node: Any, keys: tuple[Any, ...]) -> bool:
    """Whether `node` holds one of `keys` (a field or dict key), or is a NamedTuple of one of those names."""
    if _is_named_tuple(node):
        return type(node).__name__ in keys or any(k in node._fields for k in keys)
    return isinstance(node, dict) and any(k in node for k in keys)


def _walk(tree: Any, stop: Callable[[Any], bool]) -> list[tuple[KeyPath, Any]]:
    """`jax.tree_util.tree_leaves_with_path(tree, is_leaf=stop)`, NamedTuple fields as `NamedTupleKey`s."""
    out: list[tuple[KeyPath, Any]] = []
    leaves = jax.tree_util.tree_leaves_with_path(tree, is_leaf=lambda x: stop(x) or _is_named_tuple(x))
    for path, node in leaves:
        if stop(node) or not _is_named_tuple(node):
            out.append((path, node))
            continue
        for field in node._fields:
            entry = NamedTupleKey(type(node).__name__, field)
            out.extend(((*path, entry, *sub), leaf) for sub, leaf in _walk(getattr(node, field), stop))
    return out


def _children(path: KeyPath, node: Any) -> list[tuple[KeyPath, Any]]:
    """The fields of a NamedTuple or the items of a dict, each with its path."""
    if _is_named_tuple(node):
        name = type(node).__name__
        return [((*path, NamedTupleKey(name, f)), getattr(node, f)) for f in node._fields]
    return [((*path, jax.tree_util.DictKey(k)), v) for k, v in node.items()]


def _find(tree: Any, key: Any) -> list[tuple[KeyPath, Any]]:
    """Every `(path, value)` named `key`: the outermost first, then those inside each of them."""
    holders = [(p, n) for p, n in _walk(tree, lambda x: _has_any(x, (key,))) if _has_any(n, (key,))]
    found: list[tuple[KeyPath, Any]] = []
    for path, node in holders:
        if _is_named_tuple(node) and type(node).__name__ == key:
            found.append((path, node))
        elif _is_named_tuple(node):
            found.append(((*path, NamedTupleKey(type(node).__name__, key)), getattr(node, key)))
        else:
            found.append(((*path, jax.tree_util.DictKey(key)), node[key]))
    for path, node in holders:
        for child_path, child in _children(path, node):
            found.extend(((*child_path, *p), v) for p, v in _find(child, key))
    return found


def _is_node(x: Any) -> bool:
    return _is_named_tuple(x) or isinstance(x, dict)


def _names(tree: Any) -> list[str]:
    """Every name `get` can find in `tree`: NamedTuple classes and fields, dict keys."""
    names: builtins.set[str] = builtins.set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if _is_named_tuple(node):
            names.update([type(node).__name__, *node._fields])
            todo.extend(node)
        elif isinstance(node, dict):
            names.update(map(str, node))
            todo.extend(node.values())
        else:
            todo.extend(x for x in jax.tree.leaves(node, is_leaf=_is_node) if _is_node(x))
    return sorted(names)


def _paths(found: list[tuple[KeyPath, Any]]) -> str:
    return ", ".join(jax.tree_util.keystr(p) or "<root>" for p, _ in found)


def get_all_with_path(tree: Any, key: Any, filtering: Filtering | None = None) -> list[tuple[KeyPath, Any]]:
    """Every value named `key` in `tree`, with its path.

    `key` names a NamedTuple field, a dict key or a NamedTuple class (see the module). The
    outermost matches come first, then the matches inside each of them.

    Args:
      tree: the tree to search (an optimizer state).
      key: the name.
      filtering: `filtering(path, value) -> bool`, keeping only the matches it accepts; a
        field's path entry is a `NamedTupleKey` (`.tuple_name`, `.name`).

    Returns:
      A list of `(path, value)`; `jax.tree_util.keystr(path)` prints a path.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx, gradtx.optax_compat as optax
        >>> state = optax.adam(0.1).init(jnp.zeros(2))
        >>> [jax.tree_util.keystr(p) for p, _ in gradtx.tree.get_all_with_path(state, "count")]
        ['[0]ScaleByAdamState.count']
    """
    found = _find(tree, key)
    return [(p, v) for p, v in found if filtering(p, v)] if filtering else found


def get(tree: Any, key: Any, default: Any = None, filtering: Filtering | None = None) -> Any:
    """The one value named `key` in `tree` (a field, a dict key or a NamedTuple's class name), else `default`.

    Args:
      tree: the tree to search (an optimizer state).
      key: the name (``"learning_rate"``, ``"mu"``, ``"ScaleByAdamState"``).
      default: what to return when nothing is named `key`.
      filtering: `filtering(path, value) -> bool`, to pick among several matches (see
        `get_all_with_path`).

    Returns:
      The value, or `default`.

    Raises:
      KeyError: when several values are named `key` (and `filtering` keeps more than one),
        naming their paths.

    Example:
        >>> import jax.numpy as jnp, gradtx, gradtx.optax_compat as optax
        >>> state = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1).init(jnp.zeros(2))
        >>> gradtx.tree.get(state, "learning_rate")
        Array(0.1, dtype=float32)
    """
    found = get_all_with_path(tree, key, filtering)
    if len(found) > 1:
        raise _MultipleValuesError(
            f"`gradtx.tree.get`: {len(found)} values are named {key!r} ({_paths(found)}); pass "
            f"`filtering=lambda path, value: ...` to choose one, or read them all with `get_all_with_path`."
        )
    return found[0][1] if found else default


def _key_name(entry: Any) -> Any:
    """The name a path entry stands for: a field, a dict key (str or int) or an index."""
    if isinstance(entry, NamedTupleKey):
        return entry.name
    if isinstance(entry, jax.tree_util.DictKey):
        if isinstance(entry.key, (str, int)):
            return entry.key
        raise KeyError(
            f"`gradtx.tree.set`: the dict key {entry.key!r} is neither a str nor an int; `set` replaces "
            "values under str or int keys only."
        )
    raise KeyError(f"`gradtx.tree.set`: the path entry {entry!r} names no field or key.")


def _replaced(tree: Any, values: dict[str, Any], filtering: Filtering | None) -> Any:
    """`tree` with the values named in `values` replaced, by optax's walk (see `set`)."""
    keys = tuple(values)

    def accepts(path: KeyPath, value: Any) -> bool:
        return filtering is None or filtering(path, value)

    def replace(path: KeyPath, node: Any) -> Any:
        if not _has_any(node, keys):
            return node
        if _is_named_tuple(node) and type(node).__name__ in values and accepts(path, node):
            return values[type(node).__name__]
        new: dict[Any, Any] = {}
        for child_path, child in _children(path, node):
            name = _key_name(child_path[-1])
            if name in values and accepts(child_path, child):
                new[name] = values[name]
            elif isinstance(child, (dict, list, tuple)):
                new[name] = replace(child_path, child)
            else:
                new[name] = child
        return node._replace(**new) if _is_named_tuple(node) else new

    treedef: Any = jax.tree.structure(tree, is_leaf=lambda x: _has_any(x, keys))
    return treedef.unflatten(replace(p, n) for p, n in _walk(tree, lambda x: _has_any(x, keys)))


def set(tree: Any, filtering: Filtering | None = None, /, **kwargs: Any) -> Any:
    """A copy of `tree` with the values named by the keywords replaced: `set(state, learning_rate=0.01)`.

    A keyword names a NamedTuple field, a dict key or a NamedTuple class (whose whole tuple
    is replaced). The walk is optax's: every outermost node holding a name has it replaced,
    and inside such a node the walk goes on only through children that hold a name
    themselves. So `set(inject_state, learning_rate=...)` reaches the injected value through
    any wrappers (`apply_if_finite`, `MultiSteps`, `chain`), while `set(inject_state,
    count=0)` replaces the wrapper's `count` and not the `count` of a state in its
    `inner_state` tuple (as optax does). A matched dict comes back as a plain dict.

    Args:
      tree: the tree (an optimizer state).
      filtering: `filtering(path, value) -> bool`, replacing only the matches it accepts
        (see `get_all_with_path`); positional only.
      **kwargs: the names and their new values.

    Returns:
      The new tree.

    Raises:
      KeyError: for a name found nowhere in `tree` (or nowhere `filtering` accepts), listing
        the names the tree has.

    Example:
        >>> import jax.numpy as jnp, gradtx, gradtx.optax_compat as optax
        >>> tx = optax.apply_if_finite(optax.inject_hyperparams(optax.adam)(learning_rate=0.1), 3)
        >>> state = gradtx.tree.set(tx.init(jnp.zeros(2)), learning_rate=0.01)
        >>> gradtx.tree.get(state, "learning_rate")
        0.01
    """
    for key in kwargs:
        if not get_all_with_path(tree, key, filtering):
            names = _names(tree)
            where = " that `filtering` accepts" if filtering else ""
            raise _protocol.UnknownNameError(
                f"`gradtx.tree.set`: nothing named {key!r}{where} in the tree (a name is a NamedTuple "
                f"field, a dict key or a NamedTuple class); the tree has {slots._some(key, names, 'names')}."
            )
    return _replaced(tree, kwargs, filtering)
