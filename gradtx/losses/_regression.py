"""Regression losses: squared error, L2, Huber, log-cosh, and the cosine similarity and distance."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import docs as _docs
from gradtx.losses._common import ArrayLike, Axis, check_floating, check_same_shape

_elementwise = _docs.sections(
    PREDICTIONS_TARGETS="""
    predictions: the predictions, of any shape, floating-point.
    targets: the targets, broadcastable to `predictions`; None for zeros.
    """
)


def _squared_error(fn: str, predictions: Any, targets: Any) -> jax.Array:
    check_floating(fn, "predictions", predictions)
    if targets is not None:
        check_same_shape(fn, "predictions", predictions, "targets", targets)  # no broadcasting in "-"
    errors = predictions - targets if targets is not None else predictions
    return errors**2


def squared_error(predictions: ArrayLike, targets: ArrayLike | None = None) -> jax.Array:
    r"""Element-wise squared error, :math:`(p - t)^2`; its mean is the mean squared error.

    Args:
      predictions: the predictions, of any shape, floating-point.
      targets: the targets, of the shape of `predictions`; None for zeros.

    Returns:
      The squared error of each element, with the shape of `predictions`.

    Raises:
      TypeError: for `predictions` that are not floating-point.
      ValueError: for `targets` whose shape is not that of `predictions`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.squared_error(jnp.array([1.0, 3.0]), jnp.array([0.0, 1.0]))
        Array([1., 4.], dtype=float32)
    """
    return _squared_error("squared_error", predictions, targets)


def l2_loss(predictions: ArrayLike, targets: ArrayLike | None = None) -> jax.Array:
    r"""Element-wise L2 loss, :math:`\tfrac12 (p - t)^2`: half the squared error (Bishop's convention).

    Args:
      predictions: the predictions, of any shape, floating-point.
      targets: the targets, of the shape of `predictions`; None for zeros.

    Returns:
      The loss of each element, with the shape of `predictions`.

    Raises:
      TypeError: for `predictions` that are not floating-point.
      ValueError: for `targets` whose shape is not that of `predictions`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.l2_loss(jnp.array([1.0, 3.0]), jnp.array([0.0, 1.0]))  # half the squared error
        Array([0.5, 2. ], dtype=float32)
    """
    return 0.5 * _squared_error("l2_loss", jnp.asarray(predictions), targets)


@_elementwise
def huber_loss(
    predictions: ArrayLike,
    targets: ArrayLike | None = None,
    *,
    delta: ArrayLike = 1.0,
) -> jax.Array:
    r"""Huber loss: quadratic for errors within `delta`, linear beyond.

    .. math:: \ell(e) = \begin{cases} \tfrac12 e^2 & |e| \le \delta \\
        \tfrac12 \delta^2 + \delta (|e| - \delta) & |e| > \delta \end{cases}

    Gradient descent on it is gradient descent on the L2 loss with the gradients clipped to
    :math:`[-\delta, \delta]`.

    Args:
      {PREDICTIONS_TARGETS}
      delta: the error :math:`\delta` where the loss turns linear.

    Returns:
      The loss of each element, with the broadcast shape of the inputs.

    Raises:
      TypeError: for `predictions` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.huber_loss(jnp.array([0.5, -3.0]))
        Array([0.125, 2.5  ], dtype=float32)
    """
    check_floating("huber_loss", "predictions", predictions)
    errors = (predictions - targets) if targets is not None else predictions  # type: ignore[operator]
    abs_errors = jnp.abs(errors)
    quadratic = jnp.minimum(abs_errors, delta)
    linear = abs_errors - quadratic  # max(|e| - delta, 0) without doubling the gradient at |e| = delta
    return 0.5 * quadratic**2 + delta * linear


@_elementwise
def log_cosh(predictions: ArrayLike, targets: ArrayLike | None = None) -> jax.Array:
    r"""Element-wise log-cosh loss, :math:`\log \cosh(p - t)`: a twice-differentiable Huber loss.

    About :math:`e^2 / 2` for small errors and :math:`|e| - \log 2` for large ones; computed as
    :math:`\operatorname{logaddexp}(e, -e) - \log 2`.

    Args:
      {PREDICTIONS_TARGETS}

    Returns:
      The loss of each element, with the broadcast shape of the inputs.

    Raises:
      TypeError: for `predictions` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> errors = jnp.array([0.1, 10.0])  # the loss is about e^2 / 2, then about |e| - log 2
        >>> [round(v, 4) for v in losses.log_cosh(errors).tolist()]
        [0.005, 9.3069]

    References:
      Chen, Tian, Liu, Gao, Zhang, Tang, *Log hyperbolic cosine loss improves variational
      auto-encoder*, 2019.
    """
    check_floating("log_cosh", "predictions", predictions)
    errors = jnp.asarray((predictions - targets) if targets is not None else predictions)  # type: ignore[operator]
    return jnp.logaddexp(errors, -errors) - jnp.log(2.0).astype(errors.dtype)


def _cosine_similarity(a: Any, b: Any, epsilon: Any, axis: Axis, where: Any) -> jax.Array:
    a_norm2 = jnp.sum(jnp.square(a), axis=axis, where=where, keepdims=True)
    b_norm2 = jnp.sum(jnp.square(b), axis=axis, where=where, keepdims=True)
    a_unit = a / jnp.sqrt(jnp.clip(a_norm2, epsilon))
    b_unit = b / jnp.sqrt(jnp.clip(b_norm2, epsilon))
    return jnp.sum(a_unit * b_unit, axis=axis, where=where)


_COSINE = """Args:
  predictions: the predicted vectors, `[..., dim]`, floating-point.
  targets: the target vectors, `[..., dim]`, floating-point.
  epsilon: the smallest squared norm in the denominator (guards a zero vector).
  axis: the axis, or axes, along which the vectors lie.
  where: optional mask of the elements to include in the computation.

Returns:
  The {what} of each pair of vectors, `[...]`.

Raises:
  TypeError: for `predictions` or `targets` that are not floating-point."""


@_docs.sections(COSINE=_COSINE.format(what="cosine similarity"))
def cosine_similarity(
    predictions: ArrayLike,
    targets: ArrayLike,
    *,
    epsilon: ArrayLike = 0.0,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Cosine similarity: the cosine of the angle between the predicted and the target vectors.

    .. math:: \cos \theta = \frac{a}{\max(\lVert a \rVert^2, \epsilon)^{1/2}} \cdot
        \frac{b}{\max(\lVert b \rVert^2, \epsilon)^{1/2}}

    {COSINE}

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.cosine_similarity(jnp.array([1.0, 0.0]), jnp.array([1.0, 1.0]))
        Array(0.70710677, dtype=float32)
    """
    check_floating("cosine_similarity", "predictions", predictions)
    check_floating("cosine_similarity", "targets", targets)
    return _cosine_similarity(predictions, targets, epsilon, axis, where)


@_docs.sections(COSINE=_COSINE.format(what="cosine distance"))
def cosine_distance(
    predictions: ArrayLike,
    targets: ArrayLike,
    *,
    epsilon: ArrayLike = 0.0,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Cosine distance, :math:`1 - \cos \theta`: the dissimilarity of the predicted and target vectors.

    {COSINE}

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> predictions = jnp.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
        >>> targets = jnp.array([[2.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # aligned, orthogonal, opposite
        >>> losses.cosine_distance(predictions, targets)
        Array([0., 1., 2.], dtype=float32)
    """
    check_floating("cosine_distance", "predictions", predictions)
    check_floating("cosine_distance", "targets", targets)
    return 1.0 - _cosine_similarity(predictions, targets, epsilon, axis, where)
