"""The table of optax's schedules (`optax.schedules`) -> gradtx's schedules, with optax's numbers.

A gradtx schedule that computes optax's numbers is called with adapted arguments; the rest is optax's
arithmetic, op for op, on float32 counts kept from XLA's rewrites (`opaque`), so that jitted they
give optax's eager numbers. Arguments are refused only where optax refuses them; optax's fallbacks
(a constant for `transition_steps <= 0`, a negative `transition_begin` counted as 0) are kept.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp

from gradtx import schedules as gs
from gradtx._core import checks as _checks
from gradtx.optax_compat._mirror import recipe
from gradtx.schedules._common import PI, f32, number, opaque

schedule = functools.partial(recipe, kind="schedule")


@schedule("constant_schedule", example="constant_schedule(0.5)")
def constant_schedule(a):
    """the same value at every count (as a float32 array)."""
    return lambda count: f32(a.value)


@schedule("polynomial_schedule", gs.polynomial_decay, example="polynomial_schedule(1.0, 0.0, 2, 10)")
def polynomial_schedule(a):
    """`(init_value - end_value) (1 - min(max(c - B, 0), T) / T) ** power + end_value`, with `B` the
    `transition_begin` (< 0: 0), `T` the `transition_steps` (<= 0: the constant `init_value`)."""
    if a.transition_steps <= 0:
        return constant_schedule(a.init_value)
    begin = max(a.transition_begin, 0)
    factor = gs.polynomial_decay(1.0, a.transition_steps, 0.0, a.power)  # (1 - min(c, T) / T) ** q

    def value(count):
        shifted = jnp.maximum(jnp.asarray(count) - begin, 0)
        return f32((a.init_value - a.end_value) * factor(shifted) + a.end_value)

    return value


@schedule("linear_schedule", example="linear_schedule(1.0, 0.2, 4)")
def linear_schedule(a):
    """`polynomial_schedule` with `power=1`."""
    return polynomial_schedule(a.init_value, a.end_value, 1, a.transition_steps, a.transition_begin)


@schedule("piecewise_constant_schedule", example="piecewise_constant_schedule(1.0, {10: 0.1})")
def piecewise_constant_schedule(a):
    """`init_value` times the product of the scales (>= 0) whose boundary the count has reached (TF's
    `gradtx.schedules.piecewise_constant` is a count later)."""
    steps = sorted((a.boundaries_and_scales or {}).items())
    for boundary, scale in steps:
        if not scale >= 0.0:
            raise ValueError(
                f"`{_checks.api_name('piecewise_constant_schedule')}`: the scales of `boundaries_and_scales` "
                f"must be >= 0, got {scale!r} at boundary {boundary!r}."
            )

    def value(count):
        out = f32(a.init_value)
        for boundary, scale in steps:  # optax's running product, one scale at a time
            out = jnp.where(jnp.asarray(count) >= boundary, out * scale, out)
        return out

    return value


@schedule("exponential_decay", gs.exponential_decay, example="exponential_decay(1.0, 10, 0.5)")
def exponential_decay(a):
    """`init_value * decay_rate ** (max(c - transition_begin, 0) / transition_steps)` (floored with
    `staircase`), bounded by `end_value` at every count; `transition_steps <= 0` or `decay_rate == 0`:
    the constant `init_value`."""
    if a.transition_steps <= 0 or a.decay_rate == 0:
        return constant_schedule(a.init_value)
    begin, staircase = max(a.transition_begin, 0), bool(a.staircase)  # k ** p, with p = 0 until B:
    factor = gs.exponential_decay(
        1.0, a.transition_steps, a.decay_rate, staircase=staircase, transition_begin=begin
    )
    bound = jnp.maximum if a.decay_rate < 1.0 else jnp.minimum

    def value(count):
        out = a.init_value * factor(count)
        return f32(out if a.end_value is None else bound(out, a.end_value))

    return value


@schedule("cosine_decay_schedule", gs.cosine_decay, example="cosine_decay_schedule(1.0, 10)")
def cosine_decay_schedule(a):
    """`init_value ((1 - alpha) (0.5 (1 + cos(pi min(c, T) / T))) ** exponent + alpha)`, `T` the
    `decay_steps` (> 0); any `alpha` (above 1 the value rises)."""
    number("cosine_decay_schedule", "decay_steps", a.decay_steps, _checks.check_positive)

    def value(count):
        step, steps = opaque(count, a.decay_steps)
        cosine = 0.5 * (1 + jnp.cos(PI * jnp.minimum(step, steps) / steps))
        return f32(a.init_value * ((1 - a.alpha) * cosine**a.exponent + a.alpha))

    return value


@schedule("join_schedules", gs.join_schedules, example="join_schedules([constant_schedule(1.0)] * 2, [5])")
def join_schedules(a):
    """`gradtx.schedules.join_schedules`: `schedules[i]`, restarted at count 0, from `boundaries[i-1]`."""
    return gs.join_schedules(a.schedules, a.boundaries)


@schedule(
    "piecewise_interpolate_schedule",
    gs.piecewise_interpolate,
    example='piecewise_interpolate_schedule("linear", 1.0, {4: 0.1})',
)
def piecewise_interpolate_schedule(a):
    """`gradtx.schedules.piecewise_interpolate`: from one boundary's value to the next's, linearly or along
    a cosine."""
    return gs.piecewise_interpolate(a.interpolate_type, a.init_value, a.boundaries_and_scales)


@schedule("linear_onecycle_schedule", gs.linear_onecycle, example="linear_onecycle_schedule(10, 1.0)")
def linear_onecycle_schedule(a):
    """`gradtx.schedules.linear_onecycle`: linearly up to `peak_value`, back, then down."""
    return gs.linear_onecycle(
        a.transition_steps, a.peak_value, a.pct_start, a.pct_final, a.div_factor, a.final_div_factor
    )


@schedule("cosine_onecycle_schedule", gs.cosine_onecycle, example="cosine_onecycle_schedule(10, 1.0)")
def cosine_onecycle_schedule(a):
    """`gradtx.schedules.cosine_onecycle`: along cosines up to `peak_value`, then down."""
    return gs.cosine_onecycle(a.transition_steps, a.peak_value, a.pct_start, a.div_factor, a.final_div_factor)


@schedule("warmup_constant_schedule", example="warmup_constant_schedule(0.0, 1.0, 4)")
def warmup_constant_schedule(a):
    """`linear_schedule(init_value, peak_value, warmup_steps)`."""
    return linear_schedule(a.init_value, a.peak_value, a.warmup_steps)


@schedule(
    "warmup_cosine_decay_schedule",
    gs.warmup_cosine_decay,
    example="warmup_cosine_decay_schedule(0.0, 1.0, 2, 6)",
)
def warmup_cosine_decay_schedule(a):
    """`linear_schedule` up to `peak_value`, then `cosine_decay_schedule` down to `end_value` with
    `alpha = end_value / peak_value` (0 for a zero peak); `decay_steps` (> `warmup_steps`) counts the
    warmup too."""
    if not a.decay_steps - a.warmup_steps > 0:
        raise ValueError(
            f"`{_checks.api_name('warmup_cosine_decay_schedule')}`: `decay_steps` must be > `warmup_steps` "
            f"(it counts the warmup too), got decay_steps={a.decay_steps!r} and "
            f"warmup_steps={a.warmup_steps!r}."
        )
    alpha = 0.0 if a.peak_value == 0.0 else a.end_value / a.peak_value
    warmup = linear_schedule(a.init_value, a.peak_value, a.warmup_steps)
    decay = cosine_decay_schedule(a.peak_value, a.decay_steps - a.warmup_steps, alpha, a.exponent)
    return gs.join_schedules([warmup, decay], [a.warmup_steps])


@schedule(
    "warmup_exponential_decay_schedule",
    gs.warmup_exponential_decay,
    example="warmup_exponential_decay_schedule(0.0, 1.0, 2, 2, 0.5)",
)
def warmup_exponential_decay_schedule(a):
    """`linear_schedule` up to `peak_value`, then `exponential_decay` from it, from count 0 again."""
    warmup = linear_schedule(a.init_value, a.peak_value, a.warmup_steps)
    decay = exponential_decay(
        a.peak_value, a.transition_steps, a.decay_rate, a.transition_begin, a.staircase, a.end_value
    )
    return gs.join_schedules([warmup, decay], [a.warmup_steps])


@schedule(
    "sgdr_schedule",
    example='sgdr_schedule([{"init_value": 0.0, "peak_value": 1.0, "warmup_steps": 1, "decay_steps": 3}])',
)
def sgdr_schedule(a):
    """SGD with warm restarts: one `warmup_cosine_decay_schedule(**kwargs)` cycle per dict of
    `cosine_kwargs`, each lasting its `decay_steps` counts."""
    cycles, boundaries, step = [], [], 0
    for kwargs in a.cosine_kwargs:
        cycles.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    if not cycles:
        raise ValueError(
            f"`{_checks.api_name('sgdr_schedule')}`: `cosine_kwargs` must hold at least one cycle, got none."
        )
    return gs.join_schedules(cycles, boundaries[:-1])
