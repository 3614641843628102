"""The built-in catalogue: every factory of gradtx registered with its TF names, example and sparse rule.

`gradtx.registry` is the mechanism; the package imports this package right after it, so the
registry is complete once `gradtx` is imported. One module per family (tf.train, contrib,
RETURNN, building blocks, combinators, parallel); each entry's `example` builds a working
instance; the contract suite runs over all of them and the catalogue table of
docs/guides/from-tf1.md is generated from them.
"""

from __future__ import annotations

from gradtx._catalog import (  # noqa: F401
    _combinators,
    _contrib,
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
from gradtx.registry import names

OPTIMIZER_NAMES: tuple[str, ...] = names("optimizer")
"""The gradtx names of the built-in optimizers, sorted.

(`registry.names("optimizer")` includes later registrations.)"""
