"""Softmax cross-entropy losses: with probability or integer labels, the `0 log 0 = 0` form, PolyLoss."""

from __future__ import annotations

import numbers
from typing import Any

import jax
import jax.numpy as jnp

from gradtx.losses._common import (
    ArrayLike,
    Axis,
    axis_where,
    check_floating,
    check_integer,
    normalize_axis,
)


@axis_where
def softmax_cross_entropy(
    logits: ArrayLike,
    labels: ArrayLike,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Cross-entropy between target distributions and the softmax of the logits.

    .. math:: \ell(x, y) = -\sum_j y_j \log \frac{\exp x_j}{\sum_k \exp x_k}

    The categorical cross-entropy of multi-class classification, with one-hot or probability
    labels. A `where` of one rank less than `logits` masks whole rows: it is expanded at `axis`.
    A label of 0 on a logit of :math:`-\infty` gives NaN; `safe_softmax_cross_entropy` gives 0.

    Args:
      logits: the unnormalized log-probabilities, `[..., num_classes]`, floating-point.
      labels: the target distributions (one-hot or probabilities), broadcastable to `logits`.
      {AXIS_WHERE}

    Returns:
      The cross-entropy of each prediction, `[...]`.

    Raises:
      TypeError: for `logits` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits = jnp.array([[1.2, -0.8, -0.5], [0.9, -1.2, 1.1]])
        >>> labels = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        >>> losses.softmax_cross_entropy(logits, labels)
        Array([0.2761297, 2.951799 ], dtype=float32)
    """
    check_floating("softmax_cross_entropy", "logits", logits)
    return _softmax_cross_entropy(logits, labels, axis, where)


def _softmax_cross_entropy(logits: ArrayLike, labels: Any, axis: Axis, where: Any) -> jax.Array:
    if where is not None and jnp.ndim(where) != jnp.ndim(logits):
        where = jnp.expand_dims(where, axis)  # type: ignore[arg-type]
    log_probs = jax.nn.log_softmax(logits, axis=axis, where=where)
    return -jnp.sum(labels * log_probs, axis=axis, where=where)


def softmax_cross_entropy_with_integer_labels(
    logits: ArrayLike,
    labels: ArrayLike,
    axis: int | tuple[int, ...] = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Cross-entropy between integer class labels and the softmax of the logits.

    .. math:: \ell(x, y) = \log \sum_j \exp x_j - x_y

    The log-normalizer minus the label's logit, without forming the whole log-softmax. With a
    tuple `axis`, the classes are the elements of a slice `logits[axis]` and a label is a flat
    (row-major) index into it. A `where` of the rank of the batch is expanded at `axis`; a row
    with no element included has loss 0.

    Args:
      logits: the unnormalized log-probabilities, `[..., num_classes]`, floating-point.
      labels: the integer classes in `[0, num_classes)`, `[...]`.
      axis: the axis, or tuple of axes, of the classes.
      where: optional mask of the elements to include, of the shape of `logits` or of `labels`.

    Returns:
      The cross-entropy of each prediction, `[...]`.

    Raises:
      TypeError: for `logits` that are not floating-point or `labels` that are not integers.
      ValueError: for an `axis` out of bounds, or not an int nor a tuple of ints.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits = jnp.array([[1.2, -0.8, -0.5], [0.9, -1.2, 1.1]])
        >>> losses.softmax_cross_entropy_with_integer_labels(logits, jnp.array([0, 1]))
        Array([0.27612972, 2.951799  ], dtype=float32)
    """
    fn = "softmax_cross_entropy_with_integer_labels"
    check_floating(fn, "logits", logits)
    check_integer(fn, "labels", labels, instead="softmax_cross_entropy")
    logits = jnp.asarray(logits)
    ndim = logits.ndim
    if where is not None and jnp.ndim(where) != ndim:
        where = jnp.expand_dims(where, axis)
    if isinstance(axis, tuple):
        # the class axes last, in their order, flattened into one
        class_axes = tuple(normalize_axis(fn, a, ndim) for a in axis)
        batch_axes = tuple(a for a in range(ndim) if a not in class_axes)
        axis = len(batch_axes)
        logits = logits.transpose(batch_axes + class_axes)
        logits = logits.reshape(logits.shape[:axis] + (-1,))
        if where is not None:
            where = jnp.transpose(where, batch_axes + class_axes)
            where = where.reshape(where.shape[:axis] + (-1,))
    elif isinstance(axis, numbers.Integral):
        axis = normalize_axis(fn, axis, ndim)
    else:
        raise ValueError(f"`{fn}`: `axis` must be an int or a tuple of ints, got {axis!r}.")
    label_logits = jnp.take_along_axis(logits, jnp.expand_dims(labels, axis), axis=axis).take(0, axis=axis)
    out = jax.nn.logsumexp(logits, axis=axis, where=where) - label_logits
    if where is not None:
        out = jnp.where(jnp.any(where, axis), out, 0.0)
    return out


@jax.custom_jvp
def _weighted_log_softmax(x: jax.Array, weights: jax.Array) -> jax.Array:
    """`weights * log_softmax(x)` along the last axis, 0 where a weight is 0 (`0 log 0 = 0`)."""
    log_softmax = jax.nn.log_softmax(x, axis=-1)
    return jnp.where(weights != 0.0, weights * log_softmax, jnp.zeros_like(log_softmax))


@_weighted_log_softmax.defjvp
def _weighted_log_softmax_jvp(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
    """The derivative of `w * log_softmax(x)` everywhere, finite even where `x` is -inf and `w` 0."""
    (x, weights), (x_dot, weights_dot) = primals, tangents
    log_softmax = jax.nn.log_softmax(x, axis=-1)
    out = jnp.where(weights != 0.0, weights * log_softmax, jnp.zeros_like(log_softmax))
    tangent = (
        weights * x_dot
        - weights * jnp.sum(x_dot * jax.nn.softmax(x, axis=-1), axis=-1, keepdims=True)
        + weights_dot * log_softmax
    )
    return out, tangent


def safe_softmax_cross_entropy(logits: ArrayLike, labels: ArrayLike) -> jax.Array:
    r"""Softmax cross-entropy along the last axis that counts a label of 0 on a -inf logit as 0.

    .. math:: \ell(x, y) = -\sum_j y_j \log \operatorname{softmax}(x)_j,
        \qquad 0 \cdot \log 0 = 0

    `softmax_cross_entropy` gives NaN for such a term; here it is 0, and so is its derivative.

    Args:
      logits: the unnormalized log-probabilities, `[..., num_classes]`, floating-point.
      labels: the target distributions (non-negative, summing to 1), broadcastable to `logits`.

    Returns:
      The cross-entropy of each prediction, `[...]`.

    Raises:
      TypeError: for `logits` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.safe_softmax_cross_entropy(jnp.array([0.0, -jnp.inf]), jnp.array([1.0, 0.0]))
        Array(-0., dtype=float32)
    """
    check_floating("safe_softmax_cross_entropy", "logits", logits)
    return -jnp.sum(_weighted_log_softmax(logits, labels), axis=-1)


@axis_where
def poly_loss_cross_entropy(
    logits: ArrayLike,
    labels: ArrayLike,
    *,
    epsilon: ArrayLike = 2.0,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Poly-1 loss: softmax cross-entropy plus `epsilon` times the first polynomial term.

    .. math:: L_{\text{Poly-1}} = -\log P_t + \epsilon (1 - P_t),
        \qquad 1 - P_t = \sum_j y_j (1 - \operatorname{softmax}(x)_j)

    the leading coefficient of cross-entropy's expansion in powers of :math:`1 - P_t` changed by
    :math:`\epsilon` (the paper recommends 2 for ImageNet classification, -1 for detection).

    Args:
      logits: the unnormalized log-probabilities, `[..., num_classes]`, floating-point.
      labels: the target distributions, broadcastable to `logits`, floating-point.
      epsilon: the change :math:`\epsilon` of the first polynomial coefficient.
      {AXIS_WHERE}

    Returns:
      The loss of each prediction, `[...]`.

    Raises:
      TypeError: for `logits` or `labels` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits = jnp.array([[1.2, -0.8, -0.5], [0.9, -1.2, 1.1]])
        >>> labels = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        >>> [round(v, 4) for v in losses.poly_loss_cross_entropy(logits, labels).tolist()]
        [0.7587, 4.8473]
        >>> cross_entropy = losses.poly_loss_cross_entropy(logits, labels, epsilon=0.0)  # no polynomial term
        >>> [round(v, 4) for v in cross_entropy.tolist()]
        [0.2761, 2.9518]

    References:
      Leng, Xu, Lin, Tan, Ho, Tang, Cheng, Anguelov, Tan, *PolyLoss: a polynomial expansion
      perspective of classification loss functions*, ICLR 2022.
    """
    check_floating("poly_loss_cross_entropy", "logits", logits)
    check_floating("poly_loss_cross_entropy", "labels", labels)
    p = jax.nn.softmax(logits, axis=axis, where=where)
    one_minus_pt = jnp.sum(labels * (1 - p), axis=axis, where=where)
    cross_entropy = _softmax_cross_entropy(logits, labels, axis, where)
    return cross_entropy + epsilon * one_minus_pt
