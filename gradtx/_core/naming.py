"""A transform's name: the public factories that made it, for a checkpoint to record which transform wrote it.

`_base.api` names every transform a public factory returns (`checkpoint.transform_name`
reads it):

- an optimizer or a building block by the factory the user called: `adam`, `nadam`,
  `scale_by_adam`, `optax_compat.adam` (an alias that calls another alias is named by the
  outer one; `gradient_descent`, the same function as `sgd`, is `sgd`);
- a combinator by its name and its members' names, in the order given:
  `chain(scale_by_adam, scale_by_learning_rate)`, `partition({a: adam, b: sgd})`;
- a wrapper that keeps its member's state as it is (its `init` is the member's, as
  `parallel.cross_shard`'s) by its member's name alone: a run moves between one device
  and many;
- a transform of another library (or one built by hand) by its package and the function
  that made its `update`: `optax.scale_by_adam`, `optax.chain`.

Hyperparameters are not part of a name (`adam(0.1)` and `adam(0.2)` are both `adam`: a
resumed run may change its learning rate). The name is kept on the transform's `update`
function, so the state pytree is untouched.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

_ATTR = "_gradtx_name"
_FLAT = frozenset({"optimizers", "transforms", "combinators"})  # their names are re-exported as gradtx's


def _qualified(module: str | None, name: str) -> str:
    """`name` under its public path: `adam`, `optax_compat.adam`, `parallel.cross_shard`, `optax.chain`."""
    parts = (module or "").split(".")
    if parts[0] != "gradtx":
        return name if parts[0] in ("", "__main__") else f"{parts[0]}.{name}"
    public = list(itertools.takewhile(lambda p: not p.startswith("_"), parts[1:]))  # up to a private module
    return ".".join([*(p for p in public if p not in _FLAT), name])


def factory_name(factory: Any) -> str:
    """The public name of a factory (a function returning transforms)."""
    return _qualified(
        getattr(factory, "__module__", None), getattr(factory, "__name__", type(factory).__name__)
    )


def is_transform(x: Any) -> bool:
    """True for anything with callable `init` and `update` (gradtx's, optax's)."""
    return callable(getattr(x, "init", None)) and callable(getattr(x, "update", None))


def name_of(tx: Any) -> str:
    """The name of the transform `tx` (see the module's docstring)."""
    update = getattr(tx, "update", None)
    name = given_name(update)
    if name is not None:
        return name
    raw = getattr(update, "_gradtx_raw", None)  # an `api` factory's transform, as it was wrapped
    if raw is not None and raw is not tx:
        return name_of(raw)
    made_by = (getattr(update, "__qualname__", None) or type(update).__name__).split(".<locals>")[0]
    return _qualified(getattr(update, "__module__", None), made_by)


def given_name(fn: Any) -> str | None:
    """The name `label` gave the function `fn`, if any."""
    name = getattr(fn, _ATTR, None)
    return name if isinstance(name, str) else None


def label(fn: Any, name: str) -> None:
    """Give the function `fn` the name `name` (a function that takes no attributes keeps none)."""
    try:
        setattr(fn, _ATTR, name)
    except (AttributeError, TypeError):
        pass


def named(tx: Any, name: str) -> Any:
    """`tx`, its `update` now carrying `name`."""
    label(tx.update, name)
    return tx


def _members(x: Any) -> Iterator[Any]:
    """The transforms in an argument: itself, or those in a tuple, list or dict (in order)."""
    if is_transform(x):
        yield x
    elif isinstance(x, (tuple, list)):
        for item in x:
            yield from _members(item)
    elif isinstance(x, dict):
        for key in sorted(x, key=str):
            yield from _members(x[key])


def _render(x: Any) -> str | None:
    """The names of the transforms in an argument (`{key: name}` for a dict's), or None if it holds none."""
    if is_transform(x):
        return name_of(x)
    if isinstance(x, (tuple, list)):
        parts = [r for r in map(_render, x) if r is not None]
        return ", ".join(parts) if parts else None
    if isinstance(x, dict):
        parts = [f"{k}: {r}" for k in sorted(x, key=str) if (r := _render(x[k])) is not None]
        return "{" + ", ".join(parts) + "}" if parts else None
    return None


def for_factory(name: str, result: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The name of `result`, which the factory `name` returned when called with `args` and `kwargs`."""
    arguments = (*args, *kwargs.values())
    members = [m for a in arguments for m in _members(a)]
    if not members:
        return name
    if len(members) == 1:  # a wrapper that keeps its member's state is named by its member
        member = members[0]
        raw = getattr(member.update, "_gradtx_raw", None)
        if result.init is member.init or (raw is not None and result.init is raw.init):
            return name_of(member)
    return f"{name}({', '.join(r for r in map(_render, arguments) if r is not None)})"
