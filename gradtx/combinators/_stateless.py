"""Transforms without state: `identity` and `stateless`."""

from __future__ import annotations

from typing import Any, Callable

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry


@_registry.transform()
def identity() -> _protocol.GradientTransformation:
    """Leave the updates unchanged (the neutral element of `chain`).

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.identity()
        >>> tx.update(jnp.ones(2), tx.init(None))[0]
        Array([1., 1.], dtype=float32)
    """

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        return updates, state

    return _protocol.ElementWise(init_fn, update_fn)


@_factory.api
def stateless(
    f: Callable[[_protocol.Updates, _protocol.Params | None], _protocol.Updates],
) -> _protocol.GradientTransformation:
    """A transform from a function `f(updates, params) -> updates` that keeps no state.

    Args:
      f: maps the whole update tree (and the params, possibly `None`) to new updates.

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Raises:
      TypeError: if `f` is not callable.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.stateless(lambda u, p: jax.tree.map(jnp.sign, u))
        >>> tx.update(jnp.array([-3.0, 2.0]), tx.init(None))[0]
        Array([-1.,  1.], dtype=float32)
    """
    _checks.check_callable("stateless", "f", f)

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates: Any, state, params=None, **extra_args):
        del extra_args
        return f(updates, params), state

    return _protocol.GradientTransformation(init_fn, update_fn)
