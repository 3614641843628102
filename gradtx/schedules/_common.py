"""Shared by the schedules: float32 casts, barriers against XLA rewrites, argument checks, docs."""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gradtx._core import checks as _checks
from gradtx._core import docs as _docs

Scalar = Any
"""A Python number or a scalar jax/NumPy array."""

PI = np.float32(math.pi)  # TF: constant_op.constant(math.pi), a float32

RETURNS_RAISES = """Returns:
      A schedule `count -> float32 scalar`.

    Raises:
      TypeError: if an argument has the wrong type.
      ValueError: if an argument is out of its range or not finite."""

P_ARGS = (
    """Args:
      learning_rate: the initial learning rate (>= 0).
      decay_steps: the number of steps per decay period, `d` (> 0).
      decay_rate: the decay per period, `k` (>= 0).
      staircase: floor `count / decay_steps`, so that the rate drops in steps.

    """
    + RETURNS_RAISES
)


doc = _docs.sections(P_ARGS=P_ARGS, RETURNS_RAISES=RETURNS_RAISES)
"""Fill the shared `{P_ARGS}` and `{RETURNS_RAISES}` sections of a docstring."""


def f32(x: Any) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


def opaque(count: Any, *values: Any) -> tuple[jax.Array, ...]:
    """`(float32(count), *float32(values))`, hidden from XLA's constant folding (see the module doc)."""
    count, *values = lax.optimization_barrier((jnp.asarray(count), *map(f32, values)))
    return (f32(count), *values)


def held(x: jax.Array) -> jax.Array:
    """`x`, kept from XLA's rewrites `a / pow(b, c) -> a * pow(b, -c)` and `pow(exp(a), b) -> exp(a*b)`."""
    return lax.optimization_barrier(x)


def number(fn: str, name: str, value: Any, *checks: Callable[[str, str, Any], None]) -> None:
    """`value` must be a finite real number or real scalar array (not a schedule), passing `checks`."""
    _checks.check_number(fn, name, value)
    for check in (_checks.check_finite, *checks):
        check(fn, name, value)


def check_decay(fn: str, learning_rate: Any, steps_name: str, steps: Any, **nonnegative: Any) -> None:
    number(fn, "learning_rate", learning_rate, _checks.check_nonnegative)
    number(fn, steps_name, steps, _checks.check_positive)
    for name, value in nonnegative.items():
        number(fn, name, value, _checks.check_nonnegative)
