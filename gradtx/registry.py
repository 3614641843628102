"""Names -> factories: gradtx names, TF class names, optimize_loss strings, TF argument names.

`get("MomentumOptimizer", learning_rate=0.1, momentum=0.9, use_nesterov=True)` builds the
same transform as `gradtx.momentum(0.1, 0.9, nesterov=True)`, so a TF config moves over
verbatim. Lookup ignores case, underscores and a trailing "Optimizer": `"lazy_adam"`,
`"LazyAdam"` and `"LazyAdamOptimizer"` are one name.

Every factory of the library is registered (in `gradtx/_catalog/`, one module per family, loaded with this
module) with `example` arguments that build a working instance: the contract suite
(tests/test_contract.py) runs over all of them, and the catalogue table of the "From TF1"
guide (docs/guides/from-tf1.md) is generated from them.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from typing import Any, Callable, Mapping

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol

KINDS = ("optimizer", "transform", "wrapper")
"""The kinds of entries: full optimizers, transforms from plain arguments, wrappers of a transform."""

TF_ARG_NAMES: Mapping[str, str] = {
    "beta1": "b1",
    "beta2": "b2",
    "epsilon": "eps",
    "use_nesterov": "nesterov",
    "l1_regularization_strength": "l1",
    "l2_regularization_strength": "l2",
    "l2_shrinkage_regularization_strength": "l2_shrinkage",
    "decay_var_list": "mask",
    "skip_list": "skip",
    "sign_decay_fn": "sign_decay",
    "opt": "tx",
    "optimizer": "tx",
}
"""TF argument name -> gradtx argument name; applied when the factory takes the gradtx name."""

TF_IGNORED_ARGS = (
    "use_locking",
    "name",
    "accum_name",
    "linear_name",
    "num_worker",
    "is_chief",
    "ea_custom_getter",
    "ma_custom_getter",
    "custom_getter",
    "synchronous",
)
"""TF constructor arguments with no meaning for a pure transform (names, locking): accepted and dropped."""

SPARSE_RULES = ("rows", "all_rows", "decayed_rows", "entries", "values", "dense", "custom")
"""What a row-sparse gradient does to an entry's transform (see `Entry.sparse`)."""

NONFINITE = ("propagates", "sticks", "absorbed", "skipped", "ignored")
"""What one non-finite gradient value does to an entry (see `Entry.nonfinite`)."""

NONFINITE_VALUES = ("nan", "inf", "-inf")
"""The gradient values an `Entry.nonfinite` dict is keyed by."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One registered factory.

    Attributes:
      name: the gradtx name (`gradtx.<name>`).
      factory: the function that builds the transform.
      kind: "optimizer" (a full optimizer), "transform" (a building block or combinator
        from plain arguments) or "wrapper" (takes a transform, e.g. `moving_average`).
      aliases: other accepted names (TF class names, optimize_loss strings, RETURNN names).
      example: keyword arguments that build a working instance (docs and contract tests).
      reference: the system it reproduces, as shown in the catalogue table (docs/guides/from-tf1.md).
      sparse: what a row-sparse gradient does (checked by the contract suite): "rows" --
        only the touched rows of the params and slots change, exactly as the dense rule
        applied to those rows alone; "all_rows" -- TF's rule that touches every row (TF1
        Adam), as the dense rule on the densified gradient; "decayed_rows" -- the slots
        follow the dense rule on every row (untouched rows decay), the params move on the
        touched rows only (contrib's Nadam, AddSign, PowerSign); "entries" -- as
        "decayed_rows", but entry by entry without deduplication (RETURNN's rules);
        "values" -- the rule applied to the values as they are, duplicates included (TF's
        clipping of an `IndexedSlices`); "dense" -- the gradient is densified first, same
        result as dense; "custom" -- a rule of its own, documented on the factory (the
        contract suite compares it with a reference written for it).
      extra_args: for transforms whose `update` needs extra arguments (e.g. AdamGS's
        `global_step`), a function of the 0-based step returning them.
      nonfinite: what one NaN or infinite gradient value does, the later gradients finite
        (checked by tests/test_nonfinite.py with `example`): "propagates" -- the params
        become non-finite, at that step or at the first later one that applies it
        (`accumulate_gradients`), a failure that shows; "sticks" -- the params stay finite
        but a state value stays non-finite for good, so every later update is wrong and
        nothing shows it (Lion's momentum at inf keeps its step at the learning rate);
        "absorbed" -- params and state stay finite: the value is bounded or zeroed (a sign
        step, clipping, `zero_nans`) and the step is taken; "skipped" -- params and state
        go on as if the step had not happened (`apply_if_finite`); "ignored" -- the
        gradient is not read (`set_to_zero`). One value for NaN, inf and -inf alike, or a
        dict keyed by "nan", "inf" and "-inf". A wrapper is measured around its example's
        transform and, unless it skips, passes on the behaviour of the transform it wraps.
        `apply_if_finite` is the guard: it skips such steps (tested around every optimizer).
    """

    name: str
    factory: Callable[..., _protocol.GradientTransformation]
    kind: str
    aliases: tuple[str, ...] = ()
    example: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reference: str = ""
    sparse: str = "rows"
    extra_args: Callable[[int], dict] | None = None
    nonfinite: str | Mapping[str, str] = "propagates"

    def on_nonfinite(self, value: str) -> str:
        """What a gradient value `value` ("nan", "inf" or "-inf") does to the entry (see `nonfinite`)."""
        _checks.check_one_of("Entry.on_nonfinite", "value", value, NONFINITE_VALUES)
        return self.nonfinite if isinstance(self.nonfinite, str) else self.nonfinite[value]

    def extra(self, step: int) -> dict:
        """The extra arguments of `update` at 0-based step `step` (`{}` for most entries)."""
        return {} if self.extra_args is None else self.extra_args(step)

    def build(self, **overrides: Any) -> _protocol.GradientTransformation:
        """The transform made from `example` updated with `overrides`."""
        return self.factory(**{**self.example, **overrides})


def _key(name: str) -> str:
    k = name.lower().replace("_", "").replace("-", "")
    return k[: -len("optimizer")] if k.endswith("optimizer") and k != "optimizer" else k


_ENTRIES: dict[str, Entry] = {}
_LOOKUP: dict[str, str] = {}


def register(entry: Entry, *, override: bool = False) -> Entry:
    """Add an entry; its name and aliases must not collide with a registered one.

    A factory registered this way is found by `gradtx.get` and `from_config` under each
    of its names, and joins the contract tests (tests/test_contract.py).

    Args:
      entry: the `Entry` to add.
      override: replace the entry registered under `entry.name` (a built-in one too);
        without it, a name already registered is refused, so that `get("adam")` cannot
        silently start building another factory.

    Returns:
      `entry`.

    Raises:
      ValueError: on a name collision (`entry.name` taken, without `override`; an alias
        taken by another entry), an unknown kind, sparse rule or `nonfinite` behaviour.
      TypeError: for a `nonfinite` that is neither a string nor a dict.

    Example:
        >>> import gradtx
        >>> from gradtx import registry
        >>> e = registry.register(registry.Entry("my_sgd", gradtx.sgd, "optimizer", aliases=("MySGD",),
        ...                                      example={"learning_rate": 0.1}))
        >>> registry.entry("MySGD").name
        'my_sgd'
        >>> _ = registry.unregister("my_sgd")  # and gone again
    """
    _checks.check_one_of("register", "kind", entry.kind, KINDS)
    _checks.check_one_of("register", "sparse", entry.sparse, SPARSE_RULES)
    _check_nonfinite(entry)
    _checks.check_bool("register", "override", override)
    if entry.name in _ENTRIES and not override:
        raise ValueError(
            f"`register`: {entry.name!r} is already registered (with factory "
            f"`{getattr(_ENTRIES[entry.name].factory, '__qualname__', _ENTRIES[entry.name].factory)}`); "
            "pass `override=True` to replace it, or register under another name."
        )
    for n in (entry.name, *entry.aliases):
        owner = _LOOKUP.get(_key(n))
        if owner is not None and owner != entry.name:
            raise ValueError(f"`register`: the name {n!r} of {entry.name!r} is already taken by {owner!r}.")
    if entry.name in _ENTRIES:  # override: the old entry's aliases go with it
        unregister(entry.name)
    _ENTRIES[entry.name] = entry
    for n in (entry.name, *entry.aliases):
        _LOOKUP[_key(n)] = entry.name
    return entry


def _check_nonfinite(entry: Entry) -> None:
    """`entry.nonfinite` is one of `NONFINITE`, or a dict from each of `NONFINITE_VALUES` to one."""
    value = entry.nonfinite
    if isinstance(value, str):
        _checks.check_one_of("register", "nonfinite", value, NONFINITE)
        return
    if not isinstance(value, Mapping):
        raise TypeError(
            f"`register`: `nonfinite` of {entry.name!r} must be a string or a dict keyed by "
            f"{', '.join(map(repr, NONFINITE_VALUES))}, got {value!r} of type {type(value).__name__}."
        )
    if set(value) != set(NONFINITE_VALUES):
        raise ValueError(
            f"`register`: `nonfinite` of {entry.name!r} must have the keys "
            f"{', '.join(map(repr, NONFINITE_VALUES))}, got {', '.join(map(repr, value))}."
        )
    for key, behaviour in value.items():
        _checks.check_one_of("register", f"nonfinite[{key!r}]", behaviour, NONFINITE)


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
    for n in (e.name, *e.aliases):
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
        ['adam', 'adam_gs', 'adamax', 'adamaxw', 'adamw']
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
        >>> e.name, e.reference
        ('momentum', 'tf.compat.v1.train.MomentumOptimizer')
    """
    found = _LOOKUP.get(_key(name)) if isinstance(name, str) else None
    if found is None:
        by_key = {_key(n): e.name for e in _ENTRIES.values() for n in (e.name, *e.aliases)}
        close_keys = difflib.get_close_matches(_key(str(name)), list(by_key), n=8, cutoff=0.6)
        close = list(dict.fromkeys(by_key[k] for k in close_keys))[:4]
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise _protocol.UnknownNameError(
            f"`gradtx.get`: unknown optimizer or transform {name!r}.{hint} "
            f"All names: gradtx.registry.names()."
        )
    return _ENTRIES[found]


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


def translate_kwargs(name: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Rename TF argument names to gradtx's for the factory `name`, dropping `use_locking`/`name`.

    Args:
      name: any name of a registered factory.
      kwargs: the arguments as TF (or gradtx) spells them.

    Returns:
      The arguments under the factory's own names.

    Raises:
      TypeError: for an argument the factory does not take, or one given under both names.

    Example:
        >>> from gradtx import registry
        >>> registry.translate_kwargs("AdamOptimizer", {"beta1": 0.8, "epsilon": 1e-7, "use_locking": False})
        {'b1': 0.8, 'eps': 1e-07}
    """
    e = entry(name)
    params = inspect.signature(e.factory).parameters
    takes_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}  # target -> the spelling it was given as
    for k, v in kwargs.items():
        if k in TF_IGNORED_ARGS and k not in params:
            continue
        target = TF_ARG_NAMES.get(k, k) if k not in params else k
        if target not in params and not takes_var_kw:
            own = [p for p in params if params[p].kind is not inspect.Parameter.VAR_POSITIONAL]
            spellings = own + [tf for tf, ours in TF_ARG_NAMES.items() if ours in params]
            close = difflib.get_close_matches(k, spellings, n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""
            raise TypeError(
                f"`gradtx.get({name!r})`: unknown argument `{k}`; `{e.name}` takes {', '.join(own)}.{hint}"
            )
        if target in out:
            raise TypeError(
                f"`gradtx.get({name!r})`: `{target}` is given twice (as `{spelled[target]}` and as `{k}`); "
                "pass one of them."
            )
        out[target] = v
        spelled[target] = k
    return out


def get(name: str, /, **kwargs: Any) -> _protocol.GradientTransformation:
    """Build a registered optimizer or transform by name, with TF's argument names accepted.

    Args:
      name: a gradtx name (`"momentum"`), a TF class name (`"MomentumOptimizer"`), or an
        optimize_loss string (`"Momentum"`, `"SGD"`); case, underscores and a trailing
        "Optimizer" are ignored.
      **kwargs: the factory's arguments, under gradtx or TF names (`use_nesterov`,
        `beta1`, `epsilon`, `l1_regularization_strength`, ...). TF's `use_locking` and
        `name` are accepted and ignored.

    Returns:
      The `GradientTransformation`.

    Raises:
      UnknownNameError: (a KeyError and a ValueError) for an unknown name; the message
        lists close names.
      TypeError: for an argument the factory does not take, or one it needs that is missing.

    Example:
        >>> import gradtx
        >>> tx = gradtx.get("MomentumOptimizer", learning_rate=0.1, momentum=0.9, use_nesterov=True)
        >>> isinstance(tx, gradtx.GradientTransformation)
        True
    """
    e = entry(name)
    arguments = translate_kwargs(name, kwargs)
    needed = [
        p.name
        for p in inspect.signature(e.factory).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        and p.name not in arguments
    ]
    if needed:
        given = ", ".join(f"`{k}`" for k in kwargs) or "no arguments"
        raise TypeError(
            f"`gradtx.get({name!r})`: `{e.name}` needs {' and '.join(f'`{n}`' for n in needed)} "
            f"(no default), got {given}."
        )
    return e.factory(**arguments)


def from_config(config: Mapping[str, Any]) -> _protocol.GradientTransformation:
    """Build an optimizer from a RETURNN-style config dict: `{"class": name, **arguments}`.

    RETURNN's `optimizer = {"class": "adam", "epsilon": 1e-8}` moves over verbatim: the
    class is any name `get` accepts and the arguments may use TF's names. RETURNN passes
    the learning rate separately; put it in the dict as `learning_rate`. The defaults are the
    factory's (TF's); for a whole RETURNN config, with RETURNN's defaults for its backend
    (`optimizer_epsilon`, PyTorch's optimizers), its gradient processing and its learning-rate
    control, use `gradtx.from_returnn_config`.

    Args:
      config: a dict with the key `"class"` and the factory's arguments.

    Returns:
      The `GradientTransformation`.

    Raises:
      TypeError: if `config` is not a dict with a string `"class"`, or an argument is unknown.
      UnknownNameError: for an unknown class.

    Example:
        >>> import gradtx
        >>> tx = gradtx.from_config({"class": "adam", "learning_rate": 1e-3, "epsilon": 1e-6})
    """
    if not isinstance(config, Mapping) or not isinstance(config.get("class"), str):
        raise TypeError(f'`from_config`: `config` must be a dict with a string "class", got {config!r}.')
    kwargs = {k: v for k, v in config.items() if k != "class"}
    return get(config["class"], **kwargs)


__all__ = [
    "Entry",
    "KINDS",
    "NONFINITE",
    "NONFINITE_VALUES",
    "SPARSE_RULES",
    "TF_ARG_NAMES",
    "TF_IGNORED_ARGS",
    "entries",
    "entry",
    "from_config",
    "get",
    "names",
    "register",
    "translate_kwargs",
    "unregister",
]
