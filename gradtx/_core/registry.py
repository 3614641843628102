"""The registry's entries: name -> factory, aliases and kind, filled by the modules that define the factories.

Each algorithm's module registers its factories beside their definitions (`@optimizer("Adam")`
above `def adam`, which also makes it a public factory, `factory.api`), so the registry is complete
once `gradtx` is imported. `gradtx.registry`
builds on it: `get`, `from_config`, TF's argument names.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.spelling import edit_distance

KINDS = ("optimizer", "transform", "wrapper")
"""The kinds of entries: full optimizers, transforms from plain arguments, wrappers of a transform."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One registered factory.

    Attributes:
      name: the gradtx name (`gradtx.<name>`).
      factory: the function that builds the transform.
      kind: "optimizer" (a full optimizer), "transform" (a building block or combinator
        from plain arguments) or "wrapper" (takes a transform, e.g. `moving_average`).
      aliases: other accepted names (TF class names, optimize_loss strings, RETURNN names).
    """

    name: str
    factory: Callable[..., _protocol.GradientTransformation]
    kind: str
    aliases: tuple[str, ...] = ()
    reference: Reference | None = None


@dataclasses.dataclass(frozen=True)
class Reference:
    """A reference implementation's class, whose arguments and defaults `gradtx.get` takes under its name.

    `gradtx.get("SOAP", lr=3e-3, betas=(0.95, 0.95))` is pytorch-optimizer's `SOAP(params, lr=3e-3,
    betas=(0.95, 0.95))`: under the class name (spelled exactly, case included) the arguments are the
    reference's, renamed by `arguments`, and a reference argument not given takes the reference's
    default from `defaults`, so a PyTorch configuration moves over verbatim. The recorded fixtures of
    tests/algorithms/references/ hold the class's own signature; the tests check `defaults` against it.

    Attributes:
      path: the class, as `library.ClassName` (`"pytorch_optimizer.SOAP"`).
      arguments: reference argument -> the factory's argument; a tuple of names splits a tuple value
        (`"betas": ("b1", "b2")`), a function maps the value to a dict of the factory's arguments
        (and raises for a value gradtx does not reproduce).
      defaults: the reference's defaults, under the reference's names, of every argument in
        `arguments` whose default differs from the factory's (or that the factory requires).
      fixed: reference arguments that gradtx reproduces at one value only, -> that value (the
        reference's default); another value is refused, naming the argument.
      free: reference arguments accepted and dropped whatever their value (`foreach`: how the
        reference loops, not what it computes).
    """

    path: str
    arguments: Mapping[str, Any]
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    free: tuple[str, ...] = ("foreach",)

    @property
    def class_name(self) -> str:
        """The class's name, under which `gradtx.get` takes the reference's arguments."""
        return self.path.rsplit(".", 1)[-1]


def _key(name: str) -> str:
    k = name.lower().replace("_", "").replace("-", "")
    return k[: -len("optimizer")] if k.endswith("optimizer") and k != "optimizer" else k


_ENTRIES: dict[str, Entry] = {}
_LOOKUP: dict[str, str] = {}


def register(entry: Entry, *, override: bool = False) -> Entry:
    """Add an entry; its name and aliases must not collide with a registered one.

    A factory registered this way is found by `gradtx.get` and `from_config` under each
    of its names.

    Args:
      entry: the `Entry` to add.
      override: replace the entry registered under `entry.name` (a built-in one too);
        without it, a name already registered is refused, so that `get("adam")` cannot
        silently start building another factory.

    Returns:
      `entry`.

    Raises:
      ValueError: on a name collision (`entry.name` taken, without `override`; an alias
        taken by another entry) or an unknown kind.

    Example:
        >>> import gradtx
        >>> from gradtx import registry
        >>> e = registry.register(registry.Entry("my_sgd", gradtx.sgd, "optimizer", aliases=("MySGD",)))
        >>> registry.entry("MySGD").name
        'my_sgd'
        >>> _ = registry.unregister("my_sgd")  # and gone again
    """
    _checks.check_one_of("register", "kind", entry.kind, KINDS)
    _checks.check_bool("register", "override", override)
    if entry.name in _ENTRIES and not override:
        raise ValueError(
            f"`register`: {entry.name!r} is already registered (with factory "
            f"`{getattr(_ENTRIES[entry.name].factory, '__qualname__', _ENTRIES[entry.name].factory)}`); "
            "pass `override=True` to replace it, or register under another name."
        )
    names = (entry.name, *entry.aliases, *([entry.reference.class_name] if entry.reference else []))
    for n in names:
        owner = _LOOKUP.get(_key(n))
        if owner is not None and owner != entry.name:
            raise ValueError(f"`register`: the name {n!r} of {entry.name!r} is already taken by {owner!r}.")
    if entry.name in _ENTRIES:  # override: the old entry's aliases go with it
        unregister(entry.name)
    _ENTRIES[entry.name] = entry
    for n in names:
        _LOOKUP[_key(n)] = entry.name
    return entry


def _registering(kind: str, aliases: tuple[str, ...], reference: Reference | None) -> Callable[[Any], Any]:
    def decorate(factory: Any) -> Any:
        public = _factory.api(factory)
        register(Entry(public.__name__, public, kind, aliases, reference))
        return public

    return decorate


def optimizer(*aliases: str, reference: Reference | None = None) -> Callable[[Any], Any]:
    """Make the decorated factory a public one (`factory.api`) and register it as an optimizer, under its
    name, `aliases` (TF's class names) and the class name of its `reference` implementation."""
    return _registering("optimizer", aliases, reference)


def transform(*aliases: str, reference: Reference | None = None) -> Callable[[Any], Any]:
    """Make the decorated factory a public one (`factory.api`) and register it as a transform (a building
    block or combinator from plain arguments)."""
    return _registering("transform", aliases, reference)


def wrapper(*aliases: str, reference: Reference | None = None) -> Callable[[Any], Any]:
    """Make the decorated factory a public one (`factory.api`) and register it as a wrapper (a transform of a
    transform)."""
    return _registering("wrapper", aliases, reference)


def unregister(name: str) -> Entry:
    """Remove an entry and its aliases (e.g. one a test or notebook registered).

    Args:
      name: any name of the entry.

    Returns:
      The removed `Entry`.

    Raises:
      UnknownNameError: for an unknown name.

    Example:
        >>> import gradtx
        >>> from gradtx import registry
        >>> _ = registry.register(registry.Entry("tmp_sgd", gradtx.sgd, "optimizer"))
        >>> registry.unregister("tmp_sgd").name, "tmp_sgd" in registry.names()
        ('tmp_sgd', False)
    """
    e = entry(name)
    del _ENTRIES[e.name]
    for n in (e.name, *e.aliases, *([e.reference.class_name] if e.reference else [])):
        _LOOKUP.pop(_key(n), None)
    return e


def entries(kind: str | None = None) -> tuple[Entry, ...]:
    """All registered entries (of one `kind` if given), sorted by name.

    Args:
      kind: "optimizer", "transform", "wrapper", or None for all.

    Returns:
      A tuple of `Entry`.

    Example:
        >>> from gradtx import registry
        >>> [e.name for e in registry.entries("optimizer") if e.name.startswith("adam")]
        ['adam', 'adam_gs', 'adam_mini', 'adamax', 'adamaxw', 'adamuon', 'adamw']
    """
    if kind is not None:
        _checks.check_one_of("entries", "kind", kind, KINDS)
    return tuple(e for _, e in sorted(_ENTRIES.items()) if kind is None or e.kind == kind)


def entry(name: str) -> Entry:
    """The entry for a gradtx name, TF class name or alias.

    Args:
      name: e.g. "adam", "AdamOptimizer", "Adam" (case and underscores do not matter).

    Returns:
      The registered `Entry`.

    Raises:
      UnknownNameError: (a KeyError and a ValueError) for an unknown name, listing the
        closest registered names.

    Example:
        >>> from gradtx import registry
        >>> e = registry.entry("MomentumOptimizer")
        >>> e.name, e.kind, e.aliases
        ('momentum', 'optimizer', ('Momentum',))
    """
    found = _LOOKUP.get(_key(name)) if isinstance(name, str) else None
    if found is None:
        close = _suggestions(str(name))
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise _protocol.UnknownNameError(
            f"`gradtx.get`: unknown optimizer or transform {name!r}.{hint} "
            f"All names: gradtx.registry.names()."
        )
    return _ENTRIES[found]


def _suggestions(name: str, n: int = 4) -> list[str]:
    """The registered spellings closest to an unknown `name`, closest first, at most one per entry.

    Every name, alias and reference class name is a candidate, spelled as registered, and so is
    each capitalized alias with "Optimizer" appended, as TF spells its classes and the lookup
    accepts them (`"AdamOptimizer"` for the alias `"Adam"`). Both sides are compared lowercased without
    underscores and hyphens, by Levenshtein distance, also with a trailing "optimizer" dropped on
    both sides, the smaller distance counting. Ties go by the spelling, and within one entry to its
    gradtx name. A spelling further than a third of the name's length (at least 2) is left out.

    Args:
      name: the name that was not found.
      n: the most spellings to return.

    Returns:
      A list of registered spellings: `"AdamOptimizer"` first for `"AdamOptimzer"`, `"momentum"`
      first for `"Momentun"`.
    """

    def plain(s: str) -> str:
        return s.lower().replace("_", "").replace("-", "")

    limit = max(2, len(_key(name)) // 3)
    best: dict[str, tuple[int, int, str]] = {}  # entry name -> (distance, not its own name, spelling)
    for e in _ENTRIES.values():
        spelled = (e.name, *e.aliases, *([e.reference.class_name] if e.reference else []))
        tf_classes = tuple(
            f"{a}Optimizer" for a in e.aliases if a[:1].isupper() and not a.endswith("Optimizer")
        )
        for s in spelled + tf_classes:
            d = min(edit_distance(plain(name), plain(s)), edit_distance(_key(name), _key(s)))
            if d <= limit:
                best[e.name] = min(best.get(e.name, (d + 1, 0, "")), (d, int(s != e.name), s))
    ranked = sorted(best.values(), key=lambda b: (b[0], b[2].lower(), b[1]))
    return [s for _, _, s in ranked[:n]]


def names(kind: str | None = None) -> tuple[str, ...]:
    """The gradtx names of all entries (of one `kind` if given), sorted.

    Args:
      kind: "optimizer", "transform", "wrapper", or None for all.

    Returns:
      A tuple of names.

    Example:
        >>> from gradtx import registry
        >>> "lazy_adam" in registry.names("optimizer"), "chain" in registry.names("optimizer")
        (True, False)
    """
    return tuple(e.name for e in entries(kind))
