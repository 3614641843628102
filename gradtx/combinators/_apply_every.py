"""`apply_every`: sum the updates of `k` steps and emit the sum every `k`-th step (zeros in between)."""

from __future__ import annotations

import functools
from typing import NamedTuple

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import update_rule


class ApplyEveryState(NamedTuple):
    """State of `apply_every`."""

    count: _protocol.Count  # int32: completed updates (optax's `count` is this modulo k)
    grad_acc: _protocol.Updates  # the sum of the updates since the last emitted one (kept after emitting)


def _apply_every_leaf(g, grad_acc, h, *, k):
    """optax's arithmetic: `acc * ga + g` and `emit * ga` (a non-finite sum stays in the accumulator)."""
    phase = h.count % k  # updates received since the last emitted one
    grad_acc = (phase != 0) * grad_acc + g
    return (phase == k - 1) * grad_acc, grad_acc


@_registry.transform()
def apply_every(k: int = 1) -> _protocol.GradientTransformation:
    r"""Sum the updates of `k` consecutive steps and emit the sum at every `k`-th step, zeros at the others.

    .. math::
        a_t = [(t - 1) \bmod k \ne 0]\, a_{t-1} + g_t, \qquad
        u_t = [t \bmod k = 0]\, a_t \quad (t = 1, 2, \dots)

    optax's `apply_every`. Unlike `accumulate_gradients` (optax's `MultiSteps`), the
    transforms before it in a chain still update their state at every step, so halving
    the batch and taking `k = 2` is not the same as the full batch; use
    `accumulate_gradients` around the whole optimizer for that. The accumulator is kept
    (not zeroed) after it is emitted, as optax's; it is multiplied by 0 when the next sum
    starts, so a NaN or an infinity that reached it stays, as in optax. A row-sparse
    update is densified. The count saturates at int32's maximum (2**31 - 1 steps).

    Args:
      k: emit the accumulated sum every `k` steps (an int >= 1; 1 passes every update on).

    Returns:
      An `ElementWise` transform with state `ApplyEveryState(count, grad_acc)`.

    Raises:
      TypeError: for a non-int `k`.
      ValueError: for `k < 1`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.apply_every(k=2)
        >>> state = tx.init(jnp.zeros(1))
        >>> u1, state = tx.update(jnp.array([1.0]), state)
        >>> u2, state = tx.update(jnp.array([3.0]), state)
        >>> u1, u2
        (Array([0.], dtype=float32), Array([4.], dtype=float32))

    References:
      optax's `optax.apply_every`.
    """
    _checks.check_int("apply_every", "k", k, minimum=1)
    return update_rule(
        "apply_every",
        ApplyEveryState,
        functools.partial(_apply_every_leaf, k=k),
        slots={"grad_acc": 0.0},
    )
