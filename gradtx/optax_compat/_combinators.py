"""optax's wrappers under optax's signatures (argument names, positions, defaults): gradtx's inside.

No math and no state of their own: each passes its arguments on to the gradtx combinator of
the same name, so an optax call written with keywords or positions (`apply_if_finite(
inner=...)`, `add_decayed_weights(1e-4, mask)`) runs unchanged. A masked `add_decayed_weights`
is optax's: `masked(add_decayed_weights(weight_decay), mask)` (_masked.py). `inject_hyperparams`
is optax's own combinator (_inject.py).
"""

from __future__ import annotations

from typing import Any

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.optax_compat import _masked


@_factory.api
def apply_if_finite(inner: Any, max_consecutive_errors: int) -> _protocol.GradientTransformation:
    """optax's `apply_if_finite`: `gradtx.apply_if_finite` under optax's argument names.

    Args:
      inner: the transform to guard.
      max_consecutive_errors: after this many non-finite steps in a row, apply the next anyway.

    Returns:
      A transform with state `ApplyIfFiniteState`.

    Raises:
      ValueError: for a negative `max_consecutive_errors`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.apply_if_finite(optax.sgd(0.1), max_consecutive_errors=2)
        >>> tx.update(jnp.array([jnp.nan]), tx.init(jnp.zeros(1)))[0]
        Array([0.], dtype=float32)
    """
    return gradtx.apply_if_finite(inner, max_consecutive_errors)


@_factory.api
def add_decayed_weights(weight_decay: Any = 0.0, mask: Any = None) -> _protocol.GradientTransformation:
    """optax's `add_decayed_weights`: `gradtx.add_decayed_weights`, `mask` positional, decay 0 by default.

    With a `mask` it is optax's `masked(add_decayed_weights(weight_decay), mask)`, state and all.

    Args:
      weight_decay: the decay (number, scalar array or schedule).
      mask: which parameters decay: a tree of bools (or a prefix), a function of the params, or None.

    Returns:
      A transform adding `weight_decay * params` to the updates; with a `mask`, its state is
      `MaskedState(inner_state)`.

    Raises:
      ValueError: for a negative decay.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.add_decayed_weights(0.1)
        >>> tx.update(jnp.zeros(1), tx.init(jnp.ones(1)), jnp.ones(1))[0]
        Array([0.1], dtype=float32)
    """
    if mask is None:
        return gradtx.add_decayed_weights(weight_decay)
    return _masked.masked(gradtx.add_decayed_weights(weight_decay), mask)


def global_norm(updates: Any) -> Any:
    """optax's `global_norm`: the L2 norm of all the arrays of `updates` together (`gradtx.global_norm`).

    Args:
      updates: a tree of arrays.

    Returns:
      A scalar array.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> float(optax.global_norm({"a": jnp.array([3.0]), "b": jnp.array([4.0])}))
        5.0
    """
    return gradtx.global_norm(updates)
