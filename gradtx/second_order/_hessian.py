"""Curvature of a loss `loss(params, inputs, targets)`: Hessian-vector products, the Hessian's diagonal, the
diagonal of the observed Fisher information (optax's `second_order`)."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import flatten_util

from gradtx._core import checks as _checks

LossFn = Callable[[Any, Any, Any], jax.Array]
"""A loss `loss(params, inputs, targets) -> scalar`."""


def _ravel(tree: Any) -> jax.Array:
    return flatten_util.ravel_pytree(tree)[0]


def hvp(loss: LossFn, v: jax.Array, params: Any, inputs: Any, targets: Any) -> Any:
    r"""The product of the Hessian of `loss` at `params` with a vector (forward-over-reverse, no Hessian).

    .. math:: H v, \qquad H = \nabla^2_\theta\, \ell(\theta, x, y)

    `v` is a flat vector over all the parameters (in `jax.flatten_util.ravel_pytree`'s
    order); the product comes back shaped like `params` (`optax.second_order.hvp`). One
    `jax.jvp` of `jax.grad`: the cost of about two gradients.

    Args:
      loss: `loss(params, inputs, targets) -> scalar`.
      v: a vector with one entry per parameter element.
      params: the parameters (a pytree).
      inputs: the inputs `loss` is evaluated at.
      targets: the targets `loss` is evaluated at.

    Returns:
      :math:`H v`, a pytree like `params`.

    Raises:
      TypeError: for a non-callable `loss`.
      ValueError: if `v` does not have one entry per parameter element.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import second_order
        >>> loss = lambda w, x, y: jnp.sum(x * w**2) + y  # H = diag(2 x)
        >>> second_order.hvp(loss, jnp.array([1.0, 1.0]), jnp.ones(2), jnp.array([1.0, 3.0]), 0.0)
        Array([2., 6.], dtype=float32)
    """
    fn = "hvp"
    _checks.check_callable(fn, "loss", loss)
    flat, unravel = flatten_util.ravel_pytree(params)
    if jnp.shape(v) != flat.shape:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `v` must have one entry per parameter element, shape {flat.shape}; "
            f"got shape {jnp.shape(v)}."
        )
    return jax.jvp(jax.grad(lambda p: loss(p, inputs, targets)), [params], [unravel(v)])[1]


def hessian_diag(loss: LossFn, params: Any, inputs: Any, targets: Any) -> jax.Array:
    r"""The diagonal of the Hessian of `loss` at `params`, as a flat vector.

    .. math:: \operatorname{diag}(H)_i = e_i^\top H e_i

    one Hessian-vector product per parameter element (`hvp`, batched with `jax.vmap`), so
    for small models and tests (`optax.second_order.hessian_diag`); stochastic estimators
    (`gradtx.hutchinson_estimator_diag_hessian`) scale.

    Args:
      loss: `loss(params, inputs, targets) -> scalar`.
      params: the parameters (a pytree).
      inputs: the inputs `loss` is evaluated at.
      targets: the targets `loss` is evaluated at.

    Returns:
      A vector with one entry per parameter element (`jax.flatten_util.ravel_pytree`'s order).

    Raises:
      TypeError: for a non-callable `loss`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import second_order
        >>> loss = lambda w, x, y: jnp.sum(x * w**2) + w[0] * w[1]  # diag(H) = 2 x
        >>> second_order.hessian_diag(loss, jnp.ones(2), jnp.array([1.0, 3.0]), None)
        Array([2., 6.], dtype=float32)
    """
    _checks.check_callable("hessian_diag", "loss", loss)
    basis = jnp.eye(_ravel(params).size)
    return jax.vmap(lambda e: jnp.vdot(e, _ravel(hvp(loss, e, params, inputs, targets))))(basis)


def fisher_diag(negative_log_likelihood: LossFn, params: Any, inputs: Any, targets: Any) -> jax.Array:
    r"""The diagonal of the observed Fisher information: the squared gradient of the negative log likelihood.

    .. math:: \operatorname{diag}(F) = \big(\nabla_\theta\, {-\log p(y \mid x, \theta)}\big)^2

    of the whole batch's likelihood, as a flat vector (`optax.second_order.fisher_diag`; the
    empirical Fisher of one example, or of a batch taken as one observation).

    Args:
      negative_log_likelihood: `nll(params, inputs, targets) -> scalar`.
      params: the parameters (a pytree).
      inputs: the inputs it is evaluated at.
      targets: the targets it is evaluated at.

    Returns:
      A vector with one entry per parameter element (`jax.flatten_util.ravel_pytree`'s order).

    Raises:
      TypeError: for a non-callable `negative_log_likelihood`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import second_order
        >>> nll = lambda w, x, y: 0.5 * jnp.sum((x @ w - y) ** 2)
        >>> second_order.fisher_diag(nll, jnp.zeros(2), jnp.eye(2), jnp.array([1.0, -2.0]))
        Array([1., 4.], dtype=float32)
    """
    _checks.check_callable("fisher_diag", "negative_log_likelihood", negative_log_likelihood)
    return jnp.square(_ravel(jax.grad(negative_log_likelihood)(params, inputs, targets)))
