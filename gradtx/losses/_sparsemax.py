"""Sparsemax losses and Fenchel-Young losses: losses built from a regularized max function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from gradtx.losses._common import ArrayLike
from gradtx.projections import projection_simplex


def sparsemax_loss(logits: ArrayLike, labels: ArrayLike) -> jax.Array:
    r"""Binary sparsemax loss: zero exactly when `jax.nn.sparse_sigmoid(logits)` equals the labels.

    .. math:: \ell(x, y) = \operatorname{sparseplus}(\pm x), \quad - \text{ for } y = 1,\ + \text{ for } y = 0

    the Fenchel-Young loss of the sparse sigmoid (Blondel et al. 2020, Sec. 4.4).

    Args:
      logits: the scores produced by the model.
      labels: the labels, 0 or 1.

    Returns:
      The loss of each element, with the broadcast shape of the inputs.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.sparsemax_loss(jnp.array([2.0, 0.0, 0.5]), jnp.array([1, 1, 0]))
        Array([0.    , 0.25  , 0.5625], dtype=float32)

    References:
      Blondel, Martins, Niculae, *Learning with Fenchel-Young losses*, JMLR 2020.
    """
    return jax.nn.sparse_plus(jnp.where(labels, -logits, logits))  # type: ignore[operator]


def _multiclass_sparsemax_loss(scores: ArrayLike, label: ArrayLike) -> jax.Array:
    """The loss of one example: the Gini negentropy's conjugate at `scores` minus the label's score."""
    scores = jnp.asarray(scores)
    proba = projection_simplex(scores)
    # the conjugate, dot(proba, scores) + dot(proba, 1 - proba) / 2, with the label's score subtracted
    scores = (scores - scores[label]).at[label].set(0.0)
    return jnp.dot(proba, jnp.where(proba, scores, 0.0)) + 0.5 * (1.0 - jnp.dot(proba, proba))


def multiclass_sparsemax_loss(scores: ArrayLike, labels: ArrayLike) -> jax.Array:
    r"""Multiclass sparsemax loss: the Fenchel-Young loss of sparsemax, for integer labels.

    .. math:: \ell(s, y) = \langle p, s \rangle + \tfrac12 (1 - \lVert p \rVert^2) - s_y,
        \qquad p = \operatorname{sparsemax}(s)

    where sparsemax is the Euclidean projection onto the probability simplex. The loss is 0 when
    sparsemax puts all its mass on the label.

    Args:
      scores: the scores produced by the model, `[batch, num_classes]`.
      labels: the integer labels, `[batch]`.

    Returns:
      The loss of each example, `[batch]`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.multiclass_sparsemax_loss(jnp.array([[2.0, 1.0, -1.0]]), jnp.array([1]))
        Array([1.], dtype=float32)

    References:
      Martins, Astudillo, *From softmax to sparsemax: a sparse model of attention and multi-label
      classification*, ICML 2016.
    """
    return jax.vmap(_multiclass_sparsemax_loss)(scores, labels)


def make_fenchel_young_loss(max_fun: Callable[..., Any]) -> Callable[..., jax.Array]:
    r"""The Fenchel-Young loss of a regularized max function, along the last axis.

    .. math:: \ell(s, y) = \max\nolimits_\Omega(s) - \langle y, s \rangle

    The returned `fenchel_young_loss(scores, targets, *args, **kwargs)` passes `args` and
    `kwargs` to `max_fun`, applies it to the last axis of `scores` (the leading axes are batch
    axes; jaxopt's version flattened the whole array instead) and subtracts the dot product.

    Args:
      max_fun: the max function :math:`\max_\Omega`, from a vector to a scalar (the log-sum-exp
        gives the softmax cross-entropy).

    Returns:
      The loss `fenchel_young_loss(scores, targets, *args, **kwargs)`.

    Example:
        >>> import jax.numpy as jnp
        >>> from jax.scipy.special import logsumexp
        >>> from gradtx import losses
        >>> fy_loss = losses.make_fenchel_young_loss(logsumexp)
        >>> fy_loss(jnp.array([[0.0, 0.0]]), jnp.array([[1.0, 0.0]]))
        Array([0.6931472], dtype=float32)

    References:
      Blondel, Martins, Niculae, *Learning with Fenchel-Young losses*, JMLR 2020.
    """
    vdot_last_dim = jnp.vectorize(jnp.vdot, signature="(n),(n)->()")
    max_fun_last_dim = jnp.vectorize(max_fun, signature="(n)->()")

    def fenchel_young_loss(scores: Any, targets: Any, *args: Any, **kwargs: Any) -> jax.Array:
        max_value = max_fun_last_dim(scores, *args, **kwargs)
        return max_value - vdot_last_dim(targets, scores)

    return fenchel_young_loss
