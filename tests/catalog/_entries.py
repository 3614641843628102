"""The catalogue's rows: each registered factory with the fixtures the suites run it with.

The runtime registry (`gradtx.registry`) holds a factory's name, aliases and kind; this row adds
what the tests and the generated docs need: `example` arguments that build a working instance, the
system it reproduces, what a row-sparse gradient and a non-finite value do to it.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Callable, Mapping

from gradtx import registry

SPARSE_RULES = ("rows", "all_rows", "decayed_rows", "entries", "values", "dense", "custom")
"""What a row-sparse gradient does to an entry's transform (see `Entry.sparse`)."""

NONFINITE = ("propagates", "sticks", "absorbed", "skipped", "ignored")
"""What one non-finite gradient value does to an entry (see `Entry.nonfinite`)."""

NONFINITE_VALUES = ("nan", "inf", "-inf")
"""The gradient values an `Entry.nonfinite` dict is keyed by."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """A registered factory with its fixtures.

    Attributes:
      name, factory, kind, aliases: the registry's entry (checked against it).
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
    """

    name: str
    factory: Callable[..., Any]
    kind: str
    aliases: tuple[str, ...] = ()
    example: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reference: str = ""
    sparse: str = "rows"
    extra_args: Callable[[int], dict] | None = None
    nonfinite: str | Mapping[str, str] = "propagates"

    def on_nonfinite(self, value: str) -> str:
        """What a gradient value `value` ("nan", "inf" or "-inf") does to the entry (see `nonfinite`)."""
        assert value in NONFINITE_VALUES, value
        return self.nonfinite if isinstance(self.nonfinite, str) else self.nonfinite[value]

    def extra(self, step: int) -> dict:
        """The extra arguments of `update` at 0-based step `step` (`{}` for most entries)."""
        return {} if self.extra_args is None else self.extra_args(step)

    def build(self, **overrides: Any) -> Any:
        """The transform made from `example` updated with `overrides`."""
        return self.factory(**{**self.example, **overrides})


ROWS: dict[str, Entry] = {}


def register(entry: Entry) -> Entry:
    """Add a catalogue row; the registry must hold the same factory under the same name, kind and aliases."""
    runtime = registry.entry(entry.name)
    if (runtime.name, runtime.factory, runtime.kind, tuple(runtime.aliases)) != (
        entry.name,
        entry.factory,
        entry.kind,
        tuple(entry.aliases),
    ):
        raise AssertionError(f"catalogue row {entry.name!r} differs from the registry's entry {runtime}")
    if entry.sparse not in SPARSE_RULES:
        raise AssertionError(f"{entry.name}: unknown sparse rule {entry.sparse!r}")
    values = [entry.nonfinite] if isinstance(entry.nonfinite, str) else list(entry.nonfinite.values())
    if not isinstance(entry.nonfinite, str) and set(entry.nonfinite) != set(NONFINITE_VALUES):
        raise AssertionError(f"{entry.name}: nonfinite must be keyed by {NONFINITE_VALUES}")
    if any(v not in NONFINITE for v in values):
        raise AssertionError(f"{entry.name}: unknown nonfinite behaviour {entry.nonfinite!r}")
    if entry.name in ROWS:
        raise AssertionError(f"catalogue row {entry.name!r} twice")
    ROWS[entry.name] = entry
    return entry


TF1 = "tf.compat.v1.train"
"""The module of TF1's optimizers, for `Entry.reference`."""
CONTRIB = "tf.contrib.opt"
"""The module of tf.contrib's optimizers, for `Entry.reference`."""

BOUNDS_INF = MappingProxyType({"nan": "propagates", "inf": "absorbed", "-inf": "absorbed"})
"""`Entry.nonfinite` of a rule that bounds an infinite value (a sign, a clip) and passes NaN on."""

SIGN_OF_MOMENTUM = MappingProxyType({"nan": "propagates", "inf": "sticks", "-inf": "sticks"})
"""`Entry.nonfinite` of a step that is the sign of a momentum (Lion, Signum): an infinite gradient leaves
the momentum infinite for good, and the step at +-learning rate whatever the later gradients."""

FTRL = MappingProxyType({"nan": "sticks", "inf": "sticks", "-inf": "propagates"})
"""`Entry.nonfinite` of FTRL (TF's kernel does the same): a NaN `linear` pins the param to 0 for good; an
infinite gradient does that when it has the param's sign (+inf at the test's positive param) and makes the
param NaN otherwise."""


def optimizer(
    name, factory, aliases, example, reference, sparse="rows", extra_args=None, nonfinite="propagates"
):
    """Register an optimizer alias with its TF names and the TF class it reproduces."""
    register(
        Entry(
            name,
            factory,
            "optimizer",
            aliases=tuple(aliases),
            example=example,
            reference=reference,
            sparse=sparse,
            extra_args=extra_args,
            nonfinite=nonfinite,
        )
    )


def transform(name, factory, example=None, sparse="rows", extra_args=None, nonfinite="propagates"):
    """Register a building block (a transform of the updates)."""
    register(
        Entry(
            name,
            factory,
            "transform",
            example=example or {},
            sparse=sparse,
            extra_args=extra_args,
            nonfinite=nonfinite,
        )
    )


def wrapper(name, factory, example, sparse="rows", nonfinite="propagates"):
    """Register a wrapper (a transform of a transform)."""
    register(Entry(name, factory, "wrapper", example=example, sparse=sparse, nonfinite=nonfinite))


def global_step_arg(step: int) -> dict:
    """AdamGS's extra argument: TF's global step as read during the step (t - 1)."""
    return {"global_step": step}
