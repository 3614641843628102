"""The catalogue: every registered factory with the fixtures the suites run it with (`_entries.Entry`).

One module per family (tf.train, contrib, RETURNN, building blocks, combinators, parallel); each
row's `example` builds a working instance; the contract suite runs over all of them and the
catalogue table of docs/guides/from-tf1.md is generated from them. `test_registry` checks that
every factory the package registers has a row here.
"""

from __future__ import annotations

from gradtx import registry
from tests.catalog import (  # noqa: F401  (each fills the rows)
    _combinators,
    _contrib,
    _frontier_adam,
    _frontier_elementwise,
    _frontier_hessian,
    _frontier_kron,
    _frontier_muon,
    _frontier_soap,
    _frontier_spam,
    _modern,
    _modern_per_tensor,
    _optax_contrib,
    _optax_contrib_more,
    _optax_lbfgs,
    _optax_lr_free,
    _optax_modern,
    _optax_stateful,
    _optax_style,
    _optax_transforms,
    _optax_utilities,
    _parallel,
    _returnn,
    _tf_train,
    _transforms,
)
from tests.catalog._entries import NONFINITE, NONFINITE_VALUES, ROWS, SPARSE_RULES, Entry  # noqa: F401


def entries(kind: str | None = None) -> tuple[Entry, ...]:
    """The rows (of one kind, if given), sorted by name: `gradtx.registry.entries` with their fixtures."""
    return tuple(ROWS[e.name] for e in registry.entries(kind) if e.name in ROWS)


def entry(name: str) -> Entry:
    """The row of the entry `name` (any of its names, as `gradtx.registry.entry` takes)."""
    return ROWS[registry.entry(name).name]
