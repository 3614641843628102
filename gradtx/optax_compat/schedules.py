"""optax's `optax.schedules` under its names: `gradtx.optax_compat.schedules.linear_schedule`, ...

The same functions are at `gradtx.optax_compat`'s top level, as optax has them at its own
(`StatefulSchedule` and `Schedule` only here, as in optax).
"""

from __future__ import annotations

from gradtx._core.protocol import Schedule
from gradtx.optax_compat import _inject, _table_schedules
from gradtx.optax_compat._mirror import public

_NAMES = {
    **public(_table_schedules),
    **{name: getattr(_inject, name) for name in _inject.SCHEDULES_NAMES},
    "Schedule": Schedule,
}
globals().update(_NAMES)
__all__ = sorted(_NAMES)
