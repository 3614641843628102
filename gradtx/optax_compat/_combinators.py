"""optax's wrappers under optax's signatures (argument names, positions, defaults): gradtx's inside.

No math and no state of their own: each passes its arguments on to the gradtx combinator of
the same name, so an optax call written with keywords or positions (`inject_hyperparams(
inner_factory=...)`, `add_decayed_weights(1e-4, mask)`) runs unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import gradtx
from gradtx import _base, _protocol


def inject_hyperparams(
    inner_factory: Callable[..., Any], static_args: str | Iterable[str] = (), hyperparam_dtype: Any = None
) -> Callable[..., _protocol.GradientTransformation]:
    """optax's `inject_hyperparams`: `gradtx.inject_hyperparams` under optax's signature.

    Args:
      inner_factory: a factory of transforms (`optax_compat.adam`, ...).
      static_args: the names of arguments that stay static (not injected).
      hyperparam_dtype: the dtype of the injected values (default: float32 for floats).

    Returns:
      A factory with `inner_factory`'s arguments whose numeric ones live in the state.

    Raises:
      TypeError: for a factory that is not callable or static names it does not take.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
        >>> float(tx.init(jnp.zeros(1)).hyperparams["learning_rate"])
        0.10000000149011612
    """
    return gradtx.inject_hyperparams(
        inner_factory, static_args=static_args, hyperparam_dtype=hyperparam_dtype
    )


@_base.api
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


@_base.api
def masked(
    inner: Any, mask: Any, *, mask_compatible_extra_args: bool = False
) -> _protocol.GradientTransformation:
    """optax's `masked`: `gradtx.masked` under optax's signature (extra arguments are passed unmasked).

    Args:
      inner: the transform to apply to the selected parameters.
      mask: a tree of bools (or a prefix of one), or a function of the params giving one.
      mask_compatible_extra_args: optax's option to mask extra arguments shaped like the params;
        only False (optax's default) is built here.

    Returns:
      A transform with state `MaskedState(inner_state)`.

    Raises:
      NotImplementedError: for `mask_compatible_extra_args=True`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.masked(optax.scale(0.5), {"a": True, "b": False})
        >>> g = {"a": jnp.ones(1), "b": jnp.ones(1)}
        >>> tx.update(g, tx.init(g))[0]["b"]
        Array([1.], dtype=float32)
    """
    if mask_compatible_extra_args:
        raise NotImplementedError(
            "`masked`: `mask_compatible_extra_args=True` is not built in gradtx.optax_compat yet; extra "
            "arguments reach `inner` unmasked."
        )
    return gradtx.masked(inner, mask)


@_base.api
def add_decayed_weights(weight_decay: Any = 0.0, mask: Any = None) -> _protocol.GradientTransformation:
    """optax's `add_decayed_weights`: `gradtx.add_decayed_weights`, `mask` positional, decay 0 by default.

    Args:
      weight_decay: the decay (number, scalar array or schedule).
      mask: which parameters decay: a tree of bools (or a prefix), a function of the params, or None.

    Returns:
      A transform adding `weight_decay * params` to the updates.

    Raises:
      ValueError: for a negative decay.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.add_decayed_weights(0.1)
        >>> tx.update(jnp.zeros(1), tx.init(jnp.ones(1)), jnp.ones(1))[0]
        Array([0.1], dtype=float32)
    """
    return gradtx.add_decayed_weights(weight_decay, mask=mask)


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
