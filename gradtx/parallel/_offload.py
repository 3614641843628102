"""`offloaded_state`: the optimizer state kept in host memory between steps (JAX memory kinds)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol

_FN = "offloaded_state"


def offloaded_state(tx: Any) -> _protocol.GradientTransformation:
    r"""Keep `tx`'s state in host memory between steps; each step brings it to the devices and back.

    An accelerator's memory holds the parameters, the gradients, the activations and the
    optimizer state; the state (AdamW: 8 bytes per float32 parameter) can live instead in the
    host's memory (JAX's `"pinned_host"` memory kind), which is larger, at the price of moving it
    to the device and back at every step (over PCIe, or a TPU host's link), which XLA can overlap
    with the step's other work. `init` puts every state array of one or more dimensions (the
    slots, a low-bit slot's codes and scales) in host memory, keeping its sharding; `update` moves
    them to device memory (`jax.device_put(x, jax.memory.Space.Device)` in the jitted step), runs
    `tx`, and puts the new state in host memory again. Scalars (the count, a schedule's step)
    stay on the devices. With ZeRO-1 (`sharded_state(tx, axis, mesh=mesh)` inside it), each device
    holds 1/N of the state, in host memory. The numbers are `tx`'s: the same arrays, elsewhere.

    Use it under `jax.jit` (eagerly each move is its own transfer). `restore_target` gives the
    state's leaves the host memory kind, so orbax restores them there. On XLA:CPU (whose host and
    device memories are the same RAM: useful for tests only) do not donate the offloaded state to
    the step: JAX 0.10.2 aborts ("PjRtBuffer's memory kind does not match sharding's memory kind").

    Args:
      tx: the transform whose state is offloaded (a whole optimizer, or `sharded_state(...)`).

    Returns:
      A `GradientTransformation` with `tx`'s state (in host memory) and numbers.

    Raises:
      TypeError: for a `tx` that is not a transform.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.parallel.offloaded_state(gradtx.adam(1e-3))
        >>> params = {"w": jnp.ones((4, 3))}
        >>> state = tx.init(params)
        >>> state[0].m["w"].sharding.memory_kind
        'pinned_host'
        >>> u, state = jax.jit(tx.update)(params, state)
        >>> state[0].m["w"].sharding.memory_kind, state[0].count.sharding.memory_kind
        ('pinned_host', 'device')
    """
    _checks.check_transform(_FN, "tx", tx)
    inner = _factory.member(tx)

    def init_fn(params):
        return _moved(inner.init(params), jax.memory.Space.Host)

    def update_fn(updates, state, params=None, **extra_args):
        updates, new_state = inner.update(
            updates, _moved(state, jax.memory.Space.Device), params, **extra_args
        )
        return updates, _moved(new_state, jax.memory.Space.Host)

    return _factory.composite(init_fn, update_fn, inner)


def _moved(state: Any, space: Any) -> Any:
    """`state` with its arrays of one or more dimensions in memory `space` (each keeps its sharding)."""
    return jax.tree.map(lambda x: jax.device_put(x, space) if np.ndim(x) > 0 else x, state)


__all__ = ["offloaded_state"]
