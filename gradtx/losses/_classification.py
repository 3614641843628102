"""Binary and multiclass margin losses: sigmoid cross-entropy, focal, hinge and perceptron losses."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special

from gradtx.losses._common import ArrayLike, check_floating, check_same_shape

_dot_last_dim = jnp.vectorize(jnp.dot, signature="(n),(n)->()")


def sigmoid_binary_cross_entropy(logits: ArrayLike, labels: ArrayLike) -> jax.Array:
    r"""Element-wise sigmoid cross-entropy: each element is an independent binary prediction.

    .. math:: \ell(x, y) = -y \log \sigma(x) - (1 - y) \log \sigma(-x)

    (:math:`\log \sigma(-x)` is the stable form of :math:`\log(1 - \sigma(x))`). For binary or
    multi-label classification: pass the logits of class 1 with labels in {0, 1}, or per-class
    logits with per-class target probabilities. The two broadcast, so make their shapes agree.

    Args:
      logits: the unnormalized log-probabilities of the positive class, floating-point.
      labels: labels in {0, 1} or target probabilities, cast to the dtype of `logits`.

    Returns:
      The cross-entropy of each binary prediction, with the broadcast shape of the inputs.

    Raises:
      TypeError: for `logits` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.sigmoid_binary_cross_entropy(jnp.array([0.0, 2.0]), jnp.array([1, 0]))
        Array([0.6931472, 2.126928 ], dtype=float32)
    """
    check_floating("sigmoid_binary_cross_entropy", "logits", logits)
    labels = jnp.astype(labels, jnp.result_type(logits))
    log_p = jax.nn.log_sigmoid(logits)
    log_not_p = jax.nn.log_sigmoid(-logits)  # type: ignore[operator]
    return -labels * log_p - (1.0 - labels) * log_not_p


def sigmoid_focal_loss(
    logits: ArrayLike,
    labels: ArrayLike,
    *,
    alpha: ArrayLike | None = None,
    gamma: ArrayLike = 2.0,
) -> jax.Array:
    r"""Sigmoid cross-entropy scaled down on confident predictions, to focus on the hard examples.

    .. math:: \mathrm{FL}(p_t) = -\alpha_t (1 - p_t)^\gamma \log p_t

    where :math:`p_t = p = \sigma(x)` for a positive label and :math:`1 - p` for a negative one,
    and :math:`\alpha_t` is :math:`\alpha` or :math:`1 - \alpha` likewise (no weighting when `alpha`
    is None). Soft labels in [0, 1] interpolate between the two cases. The modulating factor is
    computed in log space, :math:`\exp(\gamma \log(1 - p_t))`, so that it stays finite for
    :math:`\gamma < 2` and extreme logits.

    Args:
      logits: the unnormalized log-probabilities, floating-point.
      labels: labels in {0, 1} or soft labels in [0, 1], broadcastable to `logits`.
      alpha: the weight of the positive examples in (0, 1), or None for no weighting.
      gamma: the exponent of the modulating factor :math:`1 - p_t`.

    Returns:
      The focal loss of each element, with the shape of `logits`.

    Raises:
      TypeError: for `logits` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits, labels = jnp.array([3.0, -1.0]), jnp.array([1, 1])  # one confident and right, one wrong
        >>> [round(v, 4) for v in losses.sigmoid_binary_cross_entropy(logits, labels).tolist()]
        [0.0486, 1.3133]
        >>> [round(v, 4) for v in losses.sigmoid_focal_loss(logits, labels).tolist()]  # the easy one cut most
        [0.0001, 0.7019]

    References:
      Lin, Goyal, Girshick, He, Dollar, *Focal loss for dense object detection*, ICCV 2017.
    """
    check_floating("sigmoid_focal_loss", "logits", logits)
    labels = jnp.astype(labels, jnp.result_type(logits))
    ce_loss = sigmoid_binary_cross_entropy(logits, labels)
    log_p = jax.nn.log_sigmoid(logits)
    log_q = jax.nn.log_sigmoid(-logits)  # type: ignore[operator]
    # log(1 - p_t) = log((1 - y) p + y (1 - p)), one logsumexp with weights
    log_one_minus_p_t = jax.scipy.special.logsumexp(
        jnp.stack([log_p, log_q], axis=-1), axis=-1, b=jnp.stack([1 - labels, labels], axis=-1)
    )
    loss = ce_loss * jnp.exp(gamma * log_one_minus_p_t)
    if alpha is None:
        return loss
    return jnp.multiply(alpha * labels + (1.0 - alpha) * (1.0 - labels), loss)  # `(...) * loss`, typed


def hinge_loss(predictor_outputs: ArrayLike, targets: ArrayLike) -> jax.Array:
    r"""Binary hinge loss, :math:`\max(0, 1 - s t)`, for targets in {-1, 1}.

    Args:
      predictor_outputs: the outputs :math:`s` of the decision function.
      targets: the targets :math:`t`, in {-1, 1}.

    Returns:
      The loss of each element, with the broadcast shape of the inputs.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> outputs, targets = jnp.array([2.0, 0.5, 1.0]), jnp.array([1.0, 1.0, -1.0])
        >>> losses.hinge_loss(outputs, targets)  # 0 only beyond the margin: s t >= 1
        Array([0. , 0.5, 2. ], dtype=float32)
    """
    return jnp.maximum(0, 1 - predictor_outputs * targets)


def perceptron_loss(predictor_outputs: ArrayLike, targets: ArrayLike) -> jax.Array:
    r"""Binary perceptron loss, :math:`\max(0, -s t)`, for targets in {-1, 1}.

    Args:
      predictor_outputs: the scores :math:`s` produced by the model.
      targets: the targets :math:`t`, in {-1, 1}, with the shape of `predictor_outputs`.

    Returns:
      The loss of each element, with the shape of the inputs.

    Raises:
      ValueError: for `targets` whose shape is not that of `predictor_outputs`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> outputs, targets = jnp.array([2.0, 0.5, 1.0]), jnp.array([1.0, 1.0, -1.0])
        >>> losses.perceptron_loss(outputs, targets)  # 0 on the right side, with or without a margin
        Array([0., 0., 1.], dtype=float32)

    References:
      Rosenblatt, *The perceptron: a probabilistic model for information storage and organization
      in the brain*, Psychological Review 1958.
    """
    check_same_shape("perceptron_loss", "predictor_outputs", predictor_outputs, "targets", targets)
    return jnp.maximum(0, -predictor_outputs * targets)  # type: ignore[operator]


def multiclass_hinge_loss(scores: ArrayLike, labels: ArrayLike) -> jax.Array:
    r"""Multiclass hinge loss: the largest margin violation, :math:`\max_j (s_j + [j \ne y]) - s_y`.

    Args:
      scores: the scores produced by the model, `[..., num_classes]`.
      labels: the integer labels, `[...]`.

    Returns:
      The loss of each example, `[...]`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.multiclass_hinge_loss(jnp.array([[2.0, 1.5, -1.0]]), jnp.array([0]))
        Array([0.5], dtype=float32)
    """
    one_hot = jax.nn.one_hot(labels, jnp.shape(scores)[-1])
    return jnp.max(scores + 1.0 - one_hot, axis=-1) - _dot_last_dim(scores, one_hot)


def multiclass_perceptron_loss(scores: ArrayLike, labels: ArrayLike) -> jax.Array:
    r"""Multiclass perceptron loss, :math:`\max_j s_j - s_y`.

    Args:
      scores: the scores produced by the model, `[..., num_classes]`.
      labels: the integer labels, `[...]`.

    Returns:
      The loss of each example, `[...]`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> scores = jnp.array([[2.0, 1.5, -1.0], [0.5, 2.0, 0.0]])
        >>> losses.multiclass_perceptron_loss(scores, jnp.array([0, 0]))  # how far the label's score lags
        Array([0. , 1.5], dtype=float32)

    References:
      Collins, *Discriminative training methods for hidden Markov models: theory and experiments
      with perceptron algorithms*, EMNLP 2002.
    """
    one_hot = jax.nn.one_hot(labels, jnp.shape(scores)[-1])
    return jnp.max(scores, axis=-1) - _dot_last_dim(scores, one_hot)
