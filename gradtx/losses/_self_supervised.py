"""Self-supervised (metric learning) losses: NT-Xent and the triplet margin loss."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gradtx.losses._common import ArrayLike, check_floating
from gradtx.losses._regression import _cosine_similarity


def ntxent(embeddings: ArrayLike, labels: ArrayLike, temperature: ArrayLike = 0.07) -> jax.Array:
    r"""Normalized temperature-scaled cross-entropy (NT-Xent), averaged over the positive pairs.

    With :math:`s_{ij}` the cosine similarity of embeddings :math:`i` and :math:`j` over the
    temperature :math:`\tau`, the loss of a positive pair :math:`(i, j)` (same label, :math:`i \ne j`)
    is

    .. math:: -\log \frac{\exp s_{ij}}{\exp s_{ij} + \sum_{k:\, y_k \ne y_i} \exp s_{ik}}

    Args:
      embeddings: the embeddings, `[batch, features]`, floating-point.
      labels: the group of each embedding, `[batch]`: embeddings with the same label are positive
        pairs (`[0, 0, 1, 1]` pairs the first two and the last two).
      temperature: the temperature :math:`\tau`.

    Returns:
      The loss, a scalar.

    Raises:
      TypeError: for `embeddings` that are not floating-point.
      ValueError: for `labels` whose leading size is not that of `embeddings`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> embeddings = jnp.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
        >>> print(f"{losses.ntxent(embeddings, jnp.array([0, 0, 1, 1])):.4f}")
        0.0000

    References:
      Chen, Kornblith, Norouzi, Hinton, *A simple framework for contrastive learning of visual
      representations*, ICML 2020.
    """
    check_floating("ntxent", "embeddings", embeddings)
    embeddings, labels = jnp.asarray(embeddings), jnp.asarray(labels)
    if labels.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"`ntxent`: `labels` must have the leading size of `embeddings`, {embeddings.shape[0]}; "
            f"got {labels.shape[0]}."
        )
    eps = jnp.finfo(embeddings.dtype).eps
    xcs = _cosine_similarity(embeddings[None, :, :], embeddings[:, None, :], eps, -1, None) / temperature

    same = jnp.expand_dims(labels, 1) == jnp.expand_dims(labels, 0)
    negatives = ~same
    positives = same & ~jnp.eye(same.shape[0], dtype=bool)  # not an embedding with itself
    xcs_negatives = jnp.where(negatives, xcs, -jnp.inf)
    xcs_positives = jnp.where(positives, xcs, -jnp.inf)

    # shift by each row's largest similarity, for stability
    xcs_max = jnp.max(jnp.concatenate((xcs_negatives, xcs_positives), axis=-1), axis=1, keepdims=True)
    shifted_negatives = xcs_negatives - jax.lax.stop_gradient(xcs_max)
    shifted_positives = xcs_positives - jax.lax.stop_gradient(xcs_max)

    denominator = jnp.sum(jnp.exp(shifted_negatives), axis=1, keepdims=True)
    denominator += jnp.exp(shifted_positives)
    log_softmax = shifted_positives - jnp.log(denominator)
    return -jnp.where(positives, log_softmax, 0.0).sum() / positives.sum()


def triplet_margin_loss(
    anchors: ArrayLike,
    positives: ArrayLike,
    negatives: ArrayLike,
    axis: int = -1,
    norm_degree: ArrayLike = 2,
    margin: ArrayLike = 1.0,
    eps: ArrayLike = 1e-6,
) -> jax.Array:
    r"""Triplet margin loss: the positive must be nearer the anchor than the negative, by `margin`.

    .. math:: \ell = \max\bigl(d(a, p) - d(a, n) + m, 0\bigr),
        \quad d(x, y) = \Bigl(\sum_k (x_k - y_k)^q + \varepsilon\Bigr)^{1/q}

    with :math:`q` = `norm_degree`. The differences are raised to :math:`q` without an absolute
    value (as optax does): use an even degree.

    Args:
      anchors: the anchor embeddings, `[batch, features]`, floating-point.
      positives: the embeddings similar to the anchors, `[batch, features]`, floating-point.
      negatives: the embeddings dissimilar to the anchors, `[batch, features]`, floating-point.
      axis: the axis of the features, along which the distances are taken.
      norm_degree: the degree :math:`q` of the distance (2: Euclidean).
      margin: the margin :math:`m`.
      eps: the :math:`\varepsilon` added under the root, for stability.

    Returns:
      The loss of each triplet, `[batch]`.

    Raises:
      TypeError: for embeddings that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> anchors = jnp.array([[0.0, 0.0], [1.0, 1.0]])
        >>> positives = jnp.array([[0.1, 0.1], [1.1, 1.1]])
        >>> negatives = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> losses.triplet_margin_loss(anchors, positives, negatives)
        Array([0.14142442, 0.14142442], dtype=float32)

    References:
      Balntas, Riba, Ponsa, Mikolajczyk, *Learning local feature descriptors with triplets and
      shallow convolutional neural networks*, BMVC 2016.
    """
    for name, x in (("anchors", anchors), ("positives", positives), ("negatives", negatives)):
        check_floating("triplet_margin_loss", name, x)

    def distance(other: ArrayLike) -> jax.Array:
        return jnp.power(jnp.sum(jnp.power(anchors - other, norm_degree), axis) + eps, 1 / norm_degree)  # type: ignore[operator]

    return jnp.maximum(distance(positives) - distance(negatives) + margin, 0)
