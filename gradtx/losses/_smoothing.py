"""Label smoothing."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx.losses._common import ArrayLike, Axis, axis_where, check_floating


@axis_where
def smooth_labels(
    labels: ArrayLike,
    alpha: ArrayLike,
    *,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Label smoothing: mix the one-hot labels with the uniform distribution over the classes.

    .. math:: \tilde y = (1 - \alpha)\, y + \alpha / K

    with :math:`K` the number of classes along `axis` (those in `where`, when given). Used with a
    cross-entropy loss, it favours small logit gaps and so better calibrated predictions.

    Args:
      labels: the one-hot labels, floating-point.
      alpha: the smoothing factor :math:`\alpha`.
      {AXIS_WHERE}

    Returns:
      The smoothed labels, with the shape of `labels`.

    Raises:
      TypeError: for `labels` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.smooth_labels(jnp.array([0.0, 1.0, 0.0, 0.0]), 0.2)
        Array([0.05, 0.85, 0.05, 0.05], dtype=float32)

    References:
      Muller, Kornblith, Hinton, *When does label smoothing help?*, NeurIPS 2019.
    """
    check_floating("smooth_labels", "labels", labels)
    num_categories: Any
    if where is None:
        num_categories = jnp.size(labels, axis)
    else:
        num_categories = jnp.sum(where, axis, keepdims=True)
    return (1.0 - alpha) * labels + alpha / num_categories
