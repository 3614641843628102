"""Ranking losses: the cost of the ranking that item scores induce against the items' relevance labels.

They operate on the last axis (a list of items); the leading axes are batch axes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from gradtx.losses._common import ArrayLike, check_floating


def _safe_reduce(a: jax.Array, where: Any, reduce_fn: Callable[..., Any] | None) -> jax.Array:
    """`reduce_fn(a, where=where)` that is 0, not NaN, for a mean over nothing; masked items 0 unreduced.

    A NaN already in `a` still shows: the mean's NaN is replaced only when `a` has none.
    """
    output = reduce_fn(a, where=where) if reduce_fn is not None else a
    if reduce_fn is jnp.mean:
        input_is_valid = jnp.logical_not(jnp.any(jnp.isnan(a)))
        output = jnp.where(jnp.isnan(output) & input_is_valid, 0.0, output)
    if reduce_fn is None and where is not None:
        # so that summing the unreduced losses equals reduce_fn=jnp.sum
        output = jnp.where(where, output, 0.0)
    return output


def ranking_softmax_loss(
    logits: ArrayLike,
    labels: ArrayLike,
    *,
    where: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    reduce_fn: Callable[..., Any] | None = jnp.mean,
) -> jax.Array:
    r"""Ranking softmax loss: the cross-entropy of the relevance labels with the softmax of the scores.

    .. math:: \ell(s, y) = -\sum_i y_i \log \frac{\exp s_i}{\sum_j \exp s_j}

    over the items of each list (the last axis). Items outside `where` are left out (their label
    0, their score :math:`-\infty`), and a list with no valid item out of the reduction.

    Args:
      logits: the scores of the items, `[..., list_size]`, floating-point.
      labels: the relevance labels of the items, `[..., list_size]`, cast to the dtype of `logits`.
      where: optional `[..., list_size]` mask of the valid items.
      weights: optional `[..., list_size]` weights of the items (they scale the labels).
      reduce_fn: the reduction of the lists' losses, such as `jnp.sum` or `jnp.mean` (a mean over
        no valid list is 0); None for the loss of each list, 0 for a list without valid items.

    Returns:
      The reduced loss, or the loss of each list, `[...]`, when `reduce_fn` is None.

    Raises:
      TypeError: for `logits` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> scores = jnp.array([[2.0, 1.0, 0.0], [1.0, 0.5, 1.5]])
        >>> labels = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
        >>> where = jnp.array([[True, True, False], [True, True, True]])
        >>> print(f"{losses.ranking_softmax_loss(scores, labels, where=where):.3f}")
        0.497
    """
    check_floating("ranking_softmax_loss", "logits", logits)
    labels = jnp.astype(labels, jnp.result_type(logits))
    if where is not None:
        labels = jnp.where(where, labels, jnp.zeros_like(labels))
        logits = jnp.where(where, logits, -jnp.ones_like(logits) * jnp.inf)
    if weights is not None:
        labels *= weights
    cross_entropy = labels * jax.nn.log_softmax(logits, axis=-1)
    loss = -jnp.sum(cross_entropy, axis=-1, where=where)
    if where is not None:
        where = jnp.any(where, axis=-1)  # the lists with a valid item
    return _safe_reduce(loss, where, reduce_fn)
