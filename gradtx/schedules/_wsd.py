"""The warmup-stable-decay schedule (MiniCPM's, levanter's; pytorch-optimizer's `get_wsd_schedule`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import PI, Scalar, f32, number

DECAY_TYPES = ("cosine", "1-sqrt", "linear", "1-square")
"""The shapes of the decay phase, by pytorch-optimizer's names (its `cooldown_type`)."""


def _decay_shape(decay_type: str, progress: jax.Array, num_cycles: Scalar) -> jax.Array:
    """The decay's multiplier at `progress` in [0, 1), before the floor."""
    if decay_type == "cosine":
        return jnp.maximum(0.0, 0.5 * (1.0 + jnp.cos(PI * f32(num_cycles) * 2.0 * progress)))
    if decay_type == "1-sqrt":
        return 1.0 - jnp.sqrt(progress)
    if decay_type == "1-square":
        return 1.0 - progress * progress
    return 1.0 - progress


@_factory.api
def warmup_stable_decay_schedule(
    peak_value: Scalar,
    warmup_steps: int,
    stable_steps: int,
    decay_steps: int,
    min_ratio: Scalar = 0.0,
    decay_type: str = "1-sqrt",
    num_cycles: Scalar = 0.5,
    *,
    decay_to_min: bool = False,
) -> _protocol.Schedule:
    r"""Warmup, stable, decay: ramp up linearly, hold the peak, decay to a floor, then stay at the floor.

    With :math:`w, s, d` the phases' lengths, :math:`\rho` = `min_ratio`, :math:`p = (c - w - s) / d`
    the decay's progress and :math:`f` its shape (`decay_type`):

    .. math::
        \eta(c) = \eta_p \begin{cases} c / \max(1, w) & c < w \\ 1 & c < w + s \\
            f(p) & c < w + s + d \\ \rho & \text{after} \end{cases}, \qquad
        f(p) = \begin{cases} (1-\rho) \max\big(0, \tfrac12 (1 + \cos(2\pi n p))\big) + \rho & \text{cosine}
            \\ 1 - \sqrt{p} & \text{1-sqrt} \\ 1 - p & \text{linear} \\ 1 - p^2 & \text{1-square}
            \end{cases}

    The peak times pytorch-optimizer's `get_wsd_schedule` multipliers (the `LambdaLR` factor of step
    :math:`c + 1` is :math:`\eta(c) / \eta_p`; gradtx calls a schedule with the count before the step).
    As there, only the cosine decays to the floor :math:`\rho`: the other shapes decay towards 0 and the
    value jumps to :math:`\rho` after the decay (a jump from :math:`1 - \sqrt{(d-1)/d}` for 1-sqrt).
    `decay_to_min=True` decays every shape to the floor instead, :math:`\rho + (1-\rho) f(p)` (MiniCPM's
    and levanter's form; the cosine is the same either way). The 1-sqrt decay is MiniCPM's and Hägele
    et al.'s choice; :math:`n` = `num_cycles` cosine cycles (0.5: down once).

    Args:
      peak_value: :math:`\eta_p`, the value of the stable phase (>= 0).
      warmup_steps: :math:`w`, the length of the linear warmup from 0 (an int >= 0).
      stable_steps: :math:`s`, the length of the stable phase (an int >= 0).
      decay_steps: :math:`d`, the length of the decay (an int >= 0).
      min_ratio: :math:`\rho`, the floor as a fraction of the peak, in [0, 1] (`min_lr_ratio`).
      decay_type: `"cosine"`, `"1-sqrt"`, `"linear"` or `"1-square"` (`cooldown_type`).
      num_cycles: :math:`n`, the cosine's number of cycles over the decay (>= 0; cosine only).
      decay_to_min: decay every shape to the floor (True), or as pytorch-optimizer (False).

    Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: for a non-number value, non-int steps or a non-bool `decay_to_min`.
      ValueError: for a negative or non-finite value, negative steps, `min_ratio` outside [0, 1] or an
        unknown `decay_type`.

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.warmup_stable_decay_schedule(1.0, 2, 3, 4, min_ratio=0.1, decay_type="linear")
        >>> print([round(float(lr(c)), 4) for c in range(11)])
        [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 0.75, 0.5, 0.25, 0.1, 0.1]

    References:
      Hu et al., *MiniCPM: unveiling the potential of small language models with scalable training
      strategies* (2024, arXiv:2404.06395), section 4 (WSD); Hägele et al., *Scaling laws and
      compute-optimal training beyond fixed training durations*, NeurIPS 2024 (1-sqrt cooldown);
      pytorch-optimizer's `get_wsd_schedule` (the reference of the tests); levanter's WSD schedule.
    """
    fn = "warmup_stable_decay_schedule"
    number(fn, "peak_value", peak_value, _checks.check_nonnegative)
    for name, value in (("warmup_steps", warmup_steps), ("stable_steps", stable_steps),
                        ("decay_steps", decay_steps)):  # fmt: skip
        _checks.check_int(fn, name, value, minimum=0)
    number(fn, "min_ratio", min_ratio)
    _checks.check_in_range(fn, "min_ratio", min_ratio, 0.0, 1.0)
    _checks.check_one_of(fn, "decay_type", decay_type, DECAY_TYPES)
    number(fn, "num_cycles", num_cycles, _checks.check_nonnegative)
    _checks.check_bool(fn, "decay_to_min", decay_to_min)
    stable_end, decay_end = warmup_steps + stable_steps, warmup_steps + stable_steps + decay_steps

    def schedule(count):
        c = f32(count)
        floor = f32(min_ratio)
        progress = (c - stable_end) / max(1, decay_steps)
        shape = _decay_shape(decay_type, jnp.clip(progress, 0.0, 1.0), num_cycles)
        if decay_type == "cosine" or decay_to_min:
            shape = (1.0 - floor) * shape + floor
        ratio = jnp.where(
            c < warmup_steps,
            c / max(1, warmup_steps),
            jnp.where(c < stable_end, 1.0, jnp.where(c < decay_end, shape, floor)),
        )
        return f32(peak_value) * ratio

    return schedule
