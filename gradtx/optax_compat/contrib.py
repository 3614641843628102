"""`optax.contrib` under `gradtx.optax_compat`: optax's contributed optimizers with optax's numbers.

Every name is a gradtx rule (or a chain, a wrapper) under optax's signature and state class, from the
mirror's tables (`_table_contrib.py`, `_table_contrib_matrix.py`, `_table_contrib_schedule_free.py`), or
gradtx's own object where it is optax's as it is; this module gives them optax's address, so
`optax.contrib.prodigy(...)` keeps working after `import gradtx.optax_compat as optax`. A name optax has
here and optax_compat lacks raises AttributeError saying so.
"""

from __future__ import annotations

from typing import Any

import gradtx
from gradtx.optax_compat import (
    _mirror,
    _table,
    _table_contrib,
    _table_contrib_matrix,
    _table_contrib_schedule_free,
)
from gradtx.optax_compat._mirror import public

_GRADTX = (
    "DifferentiallyPrivateAggregateState GaLoreDimensionNumbers GaLoreState HutchinsonState MomoAdamState "
    "MomoState MuonDimensionNumbers SAMState SophiaState SplitRealAndImaginaryState normalize "
    "split_real_and_imaginary"
).split()
"""optax.contrib's names that are gradtx's objects as they are."""

_NAMES = {
    **{name: getattr(gradtx, name) for name in _GRADTX},
    **{
        name: value
        for table in (_table_contrib, _table_contrib_matrix, _table_contrib_schedule_free)
        for name, value in public(table).items()
        if value is not getattr(_table, name, None)  # a top-level name the table uses
    },
    "NormalizeState": _table_contrib.NormalizeState,
}
for _name in ("scale_by_dog", "scale_by_dowg"):
    _NAMES.pop(_name, None)  # optax.contrib._dog's, not optax.contrib's
globals().update(_NAMES)

__all__ = sorted(_NAMES, key=str.lower)


def __getattr__(name: str) -> Any:
    raise _mirror.missing("gradtx.optax_compat.contrib", name)
