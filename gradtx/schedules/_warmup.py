"""Warmup: `linear_warmup` ramps into any schedule."""

from __future__ import annotations

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import Scalar, doc, f32, number, opaque


@doc
@_factory.api
def linear_warmup(
    schedule: _protocol.ScalarOrSchedule, warmup_steps: int, *, init_value: Scalar = 0.0
) -> _protocol.Schedule:
    r"""Ramp linearly from `init_value` to `schedule(warmup_steps)`, then follow `schedule`.

    .. math:: \eta(c) = \eta_i + (s(w) - \eta_i)\, c / w \ \text{ if } c < w, \quad s(c) \text{ otherwise}

    The ramp reaches `s(w)` at `c = w`, so the curve is continuous; `schedule` is not
    shifted (count `w + k` gives `s(w + k)`). With `warmup_steps = 0` this is `s` itself.

    Args:
      schedule: the schedule after warmup (`count -> value`), or a constant number.
      warmup_steps: the number of warmup steps, `w` (an int >= 0).
      init_value: the value at count 0, `eta_i`.

    {RETURNS_RAISES}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.linear_warmup(schedules.exponential_decay(1.0, 10, 0.5), 10)
        >>> print([round(float(lr(c)), 6) for c in (0, 5, 10, 20)])
        [0.0, 0.25, 0.5, 0.25]

    References:
      Goyal et al., Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour, 2017.
    """
    fn = "linear_warmup"
    if not _checks.is_schedule(schedule):
        number(fn, "schedule", schedule)
    _checks.check_int(fn, "warmup_steps", warmup_steps, minimum=0)
    number(fn, "init_value", init_value)

    def value(count):
        return f32(schedule(count) if _checks.is_schedule(schedule) else schedule)

    def warmed_up(count):
        if warmup_steps == 0:
            return value(count)
        step, init, w = opaque(count, init_value, warmup_steps)
        ramp = init + (value(jnp.asarray(warmup_steps, jnp.int32)) - init) * (step / w)
        return jnp.where(jnp.asarray(count) < warmup_steps, ramp, value(count))

    return warmed_up
