"""optax's composite schedules (one-cycle, warmups, SGDR) under optax's names, with optax's numbers.

Built from `_schedules` (and gradtx's schedules) as optax builds them from its own; see
`_schedules` for how the numbers are kept to optax's.
"""

from __future__ import annotations

from typing import Any, Iterable

from gradtx import schedules as gs
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx.optax_compat._schedules import (
    _api,
    cosine_decay_schedule,
    exponential_decay,
    linear_schedule,
)
from gradtx.schedules._common import Scalar

__all__ = [
    "cosine_onecycle_schedule",
    "linear_onecycle_schedule",
    "sgdr_schedule",
    "warmup_constant_schedule",
    "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
]


@_api
def linear_onecycle_schedule(
    transition_steps: int,
    peak_value: Scalar,
    pct_start: float = 0.3,
    pct_final: float = 0.85,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
) -> _protocol.Schedule:
    """Linearly up to `peak_value`, back to the start, then down to the start / `final_div_factor`.

    Equals `optax.linear_onecycle_schedule` (`gradtx.schedules.linear_onecycle`).

    Args:
      transition_steps: the length of the cycle (> 0).
      peak_value: the value at `int(pct_start * transition_steps)`.
      pct_start: the fraction of the cycle spent going up.
      pct_final: the fraction of the cycle at which the value is back at the start.
      div_factor: the start is `peak_value / div_factor`.
      final_div_factor: the end is the start divided by it.

    {RETURNS}

    Example:
        >>> lr = linear_onecycle_schedule(10, 1.0, 0.2, 0.6, div_factor=10.0, final_div_factor=100.0)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 4, 6, 10)])
        [0.1, 0.55, 1.0, 0.55, 0.1, 0.001]
    """
    return gs.linear_onecycle(
        transition_steps, peak_value, pct_start, pct_final, div_factor, final_div_factor
    )


@_api
def cosine_onecycle_schedule(
    transition_steps: int,
    peak_value: Scalar,
    pct_start: float = 0.3,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
) -> _protocol.Schedule:
    """Along cosines up to `peak_value`, then down to `peak_value / (div_factor * final_div_factor)`.

    Equals `optax.cosine_onecycle_schedule` (`gradtx.schedules.cosine_onecycle`).

    Args:
      transition_steps: the length of the cycle (> 0).
      peak_value: the value at `int(pct_start * transition_steps)`.
      pct_start: the fraction of the cycle spent going up.
      div_factor: the start is `peak_value / div_factor`.
      final_div_factor: the end is the start divided by it.

    {RETURNS}

    Example:
        >>> lr = cosine_onecycle_schedule(10, 1.0, 0.2, div_factor=10.0, final_div_factor=100.0)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 6, 10)])
        [0.1, 0.55, 1.0, 0.5005, 0.001]
    """
    return gs.cosine_onecycle(transition_steps, peak_value, pct_start, div_factor, final_div_factor)


@_api
def warmup_constant_schedule(init_value: Scalar, peak_value: Scalar, warmup_steps: int) -> _protocol.Schedule:
    """`linear_schedule(init_value, peak_value, warmup_steps)`. Equals `optax.warmup_constant_schedule`.

    So `warmup_steps <= 0` gives the constant `init_value`, not `peak_value`.

    Args:
      init_value: the value at count 0.
      peak_value: the value from count `warmup_steps` on.
      warmup_steps: the length of the warmup.

    {RETURNS}

    Example:
        >>> lr = warmup_constant_schedule(0.0, 1.0, 4)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 4, 9)])
        [0.0, 0.25, 1.0, 1.0]
    """
    return linear_schedule(init_value, peak_value, warmup_steps)


@_api
def warmup_cosine_decay_schedule(
    init_value: Scalar,
    peak_value: Scalar,
    warmup_steps: int,
    decay_steps: int,
    end_value: Scalar = 0.0,
    exponent: Scalar = 1.0,
) -> _protocol.Schedule:
    """`linear_schedule` up to `peak_value`, then `cosine_decay_schedule` down to `end_value`.

    Equals `optax.warmup_cosine_decay_schedule`: `decay_steps` counts the warmup too, and the
    cosine's `alpha` is `end_value / peak_value` (0 for a zero peak).

    Args:
      init_value: the value at count 0.
      peak_value: the value at the end of the warmup.
      warmup_steps: the length of the warmup.
      decay_steps: the length of the whole schedule, warmup included (> `warmup_steps`).
      end_value: the value from count `decay_steps` on.
      exponent: the power of the cosine factor.

    {RETURNS}

    Raises:
      ValueError: if `decay_steps <= warmup_steps`, as optax.

    Example:
        >>> lr = warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=2, decay_steps=6, end_value=0.1)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 4, 6, 9)])
        [0.0, 0.5, 1.0, 0.55, 0.1, 0.1]
    """
    if not decay_steps - warmup_steps > 0:
        raise ValueError(
            f"`{_checks.api_name('warmup_cosine_decay_schedule')}`: `decay_steps` must be > `warmup_steps` "
            f"(it counts the warmup too), got decay_steps={decay_steps!r} and warmup_steps={warmup_steps!r}."
        )
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    warmup = linear_schedule(init_value, peak_value, warmup_steps)
    decay = cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)
    return gs.join_schedules([warmup, decay], [warmup_steps])


@_api
def warmup_exponential_decay_schedule(
    init_value: Scalar,
    peak_value: Scalar,
    warmup_steps: int,
    transition_steps: int,
    decay_rate: Scalar,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value: Scalar | None = None,
) -> _protocol.Schedule:
    """`linear_schedule` up to `peak_value`, then `exponential_decay` from it, from count 0 again.

    Equals `optax.warmup_exponential_decay_schedule`.

    Args:
      init_value: the value at count 0.
      peak_value: the value at the end of the warmup.
      warmup_steps: the length of the warmup.
      transition_steps: the counts per decay period.
      decay_rate: the factor per period.
      transition_begin: the counts after the warmup before the decay starts.
      staircase: floor the exponent, so that the value drops in steps.
      end_value: the bound the decay stops at, or None.

    {RETURNS}

    Example:
        >>> lr = warmup_exponential_decay_schedule(0.0, 1.0, 2, transition_steps=2, decay_rate=0.5)
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 4, 6)])
        [0.0, 0.5, 1.0, 0.5, 0.25]
    """
    warmup = linear_schedule(init_value, peak_value, warmup_steps)
    decay = exponential_decay(
        peak_value, transition_steps, decay_rate, transition_begin, staircase, end_value
    )
    return gs.join_schedules([warmup, decay], [warmup_steps])


@_api
def sgdr_schedule(cosine_kwargs: Iterable[dict[str, Any]]) -> _protocol.Schedule:
    """SGD with warm restarts: `warmup_cosine_decay_schedule` cycles, one after another.

    Equals `optax.sgdr_schedule`: cycle `j` lasts `cosine_kwargs[j]["decay_steps"]` counts.

    Args:
      cosine_kwargs: one dict of `warmup_cosine_decay_schedule` arguments per cycle.

    {RETURNS}

    Raises:
      ValueError: for no cycle (optax fails at the first call).

    Example:
        >>> cycle = {"init_value": 0.0, "peak_value": 1.0, "warmup_steps": 1, "decay_steps": 3}
        >>> lr = sgdr_schedule([cycle, {**cycle, "peak_value": 0.5}])
        >>> print([round(float(lr(c)), 4) for c in (0, 1, 2, 3, 4, 5)])
        [0.0, 1.0, 0.5, 0.0, 0.5, 0.25]
    """
    cycles, boundaries, step = [], [], 0
    for kwargs in cosine_kwargs:
        cycles.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    if not cycles:
        raise ValueError(
            f"`{_checks.api_name('sgdr_schedule')}`: `cosine_kwargs` must hold at least one cycle, got none."
        )
    return gs.join_schedules(cycles, boundaries[:-1])
