"""`optax.tree_utils` under `gradtx.optax_compat`: optax's older names for `optax.tree`'s functions.

optax keeps `tree_utils.tree_<name>` as a second name of `tree.<name>` (the spelling of its own
L-BFGS and state-access docs); here each is the `gradtx.tree` function of the same name
(optax's numbers), and `NamedTupleKey` is the path entry `tree_get_all_with_path` yields.
"""

from __future__ import annotations

from typing import Any

from gradtx import tree as _tree
from gradtx.optax_compat import _mirror
from gradtx.tree._state import NamedTupleKey as NamedTupleKey

_NAMES = {f"tree_{name}": getattr(_tree, name) for name in _tree.__all__}
globals().update(_NAMES)

__all__ = sorted([*_NAMES, "NamedTupleKey"])


def __getattr__(name: str) -> Any:
    raise _mirror.missing("gradtx.optax_compat.tree_utils", name)
