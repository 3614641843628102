"""Segmentation losses: the soft Dice (Tversky) loss, its binary form and the generalized Dice loss."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx.losses._common import ArrayLike, check_rank, check_same_shape

_REDUCTIONS = ("mean", "sum", "none")


def _check_probabilities(predictions: jax.Array) -> None:
    """With `apply_softmax=False`, the classes' probabilities must sum to 1 (checked when concrete)."""
    if predictions.shape[-1] == 1:
        return  # one channel: the positive class's probability (optax refuses any but 1 here)
    sums = jnp.sum(predictions, axis=-1)
    if isinstance(sums, jax.core.Tracer):
        return
    if not jnp.allclose(sums, 1.0, rtol=1e-5):
        raise ValueError(
            "`dice_loss`: with `apply_softmax=False`, `predictions` must be probability distributions "
            f"summing to 1 along the last axis; their sums range over [{jnp.min(sums):.6f}, "
            f"{jnp.max(sums):.6f}]. Pass logits with `apply_softmax=True` instead."
        )


def dice_loss(
    predictions: ArrayLike,
    targets: ArrayLike,
    *,
    class_weights: ArrayLike | None = None,
    smooth: ArrayLike = 1.0,
    alpha: ArrayLike = 0.5,
    beta: ArrayLike = 0.5,
    apply_softmax: bool = True,
    reduction: str = "mean",
    ignore_background: bool = False,
    axis: Any = None,
) -> jax.Array:
    r"""Soft Dice loss of each class, weighting false positives and false negatives (Tversky).

    For class :math:`c`, with :math:`I_c = \sum_i p_{ic} t_{ic}`, :math:`P_c = \sum_i p_{ic}` and
    :math:`T_c = \sum_i t_{ic}` summed over the pixels :math:`i`:

    .. math:: \ell_c = 1 - \frac{I_c + s}{I_c + \alpha (P_c - I_c) + \beta (T_c - I_c) + s}

    :math:`\alpha = \beta = 1/2` is the Dice loss; :math:`\alpha > \beta` penalizes false
    positives more, :math:`\beta > \alpha` false negatives. The probabilities :math:`p` are the
    softmax of the logits over the classes (the sigmoid for a single channel).

    Args:
      predictions: the logits, `[..., num_classes]`, or `[..., 1]` or `[...]` for binary
        segmentation; probabilities when `apply_softmax` is False.
      targets: the one-hot targets, `[..., num_classes]`, or binary targets `[..., 1]` or `[...]`.
      class_weights: optional weights of the classes, `[num_classes]`.
      smooth: the smoothing :math:`s`, which keeps the ratio defined for empty classes.
      alpha: the weight :math:`\alpha` of the false positives.
      beta: the weight :math:`\beta` of the false negatives.
      apply_softmax: whether `predictions` are logits (True) or probabilities (False).
      reduction: how to reduce the classes' losses: `"mean"`, `"sum"` or `"none"`.
      ignore_background: whether to leave class 0 out (when there is more than one class).
      axis: the axis or axes summed over; None for all but the first and the last.

    Returns:
      The loss, `[...]` (the batch axes) for `"mean"` and `"sum"`, `[..., num_classes]` for `"none"`.

    Raises:
      ValueError: for shapes that differ (after adding a channel axis to a binary input),
        `class_weights` not of rank 1, an unknown `reduction`, or with `apply_softmax=False`
        probabilities over several classes that do not sum to 1 (checked outside `jax.jit`).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits = jnp.array([[[4.0, -4.0], [-4.0, 4.0]]])  # one image of two pixels, two classes
        >>> targets = jnp.array([[[1.0, 0.0], [0.0, 1.0]]])
        >>> losses.dice_loss(logits, targets)
        Array([0.00016767], dtype=float32)

    References:
      Milletari, Navab, Ahmadi, *V-Net: fully convolutional neural networks for volumetric medical
      image segmentation*, 3DV 2016.
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"`dice_loss`: `reduction` must be one of 'mean', 'sum', 'none'; got {reduction!r}.")
    predictions, targets = jnp.asarray(predictions), jnp.asarray(targets)
    if predictions.ndim == targets.ndim - 1:
        predictions = predictions[..., None]
    if targets.ndim == predictions.ndim - 1:
        targets = targets[..., None]
    check_same_shape("dice_loss", "predictions", predictions, "targets", targets)
    if not apply_softmax:
        _check_probabilities(predictions)
        probs = predictions
    elif predictions.shape[-1] == 1:
        probs = jax.nn.sigmoid(predictions)
    else:
        probs = jax.nn.softmax(predictions, axis=-1)
    axis = tuple(range(1, probs.ndim - 1)) if axis is None else axis

    intersection = jnp.sum(probs * targets, axis=axis)
    pred_sum = jnp.sum(probs, axis=axis)
    target_sum = jnp.sum(targets, axis=axis)
    numerator = intersection + smooth
    denominator = (
        intersection + alpha * (pred_sum - intersection) + beta * (target_sum - intersection) + smooth
    )
    loss = 1.0 - numerator / denominator  # [..., classes]
    if class_weights is not None:
        check_rank("dice_loss", "class_weights", class_weights, 1, "one weight per class")
        loss = loss * class_weights
    if ignore_background and probs.shape[-1] > 1:
        loss = loss[..., 1:]
    if reduction == "mean":
        return jnp.mean(loss, axis=-1)
    if reduction == "sum":
        return jnp.sum(loss, axis=-1)
    return loss


def multiclass_generalized_dice_loss(
    predictions: ArrayLike,
    targets: ArrayLike,
    *,
    smooth: ArrayLike = 1.0,
    apply_softmax: bool = True,
    ignore_background: bool = False,
) -> jax.Array:
    r"""Generalized Dice loss: the Dice loss with each class weighted by its inverse squared frequency.

    .. math:: w_c \propto \frac{1}{F_c^2 + 10^{-7}}, \quad F_c = \sum_{\text{batch, pixels}} t_c,
        \qquad \sum_c w_c = C

    which offsets class imbalance; the weighted losses of every class and example are averaged.

    Args:
      predictions: the logits, `[..., num_classes]`.
      targets: the one-hot targets, `[..., num_classes]`.
      smooth: the smoothing of the Dice ratio, which keeps it defined for empty classes.
      apply_softmax: whether `predictions` are logits (True) or probabilities (False).
      ignore_background: whether to leave class 0 out.

    Returns:
      The loss, a scalar.

    Raises:
      ValueError: for `targets` whose shape is not that of `predictions`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> targets = jnp.array([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])  # class 1 is rare
        >>> logits = jnp.array([[[4.0, -4.0]] * 4])  # class 0 everywhere: the rare class missed
        >>> round(float(losses.dice_loss(logits, targets)[0]), 4)
        0.2223
        >>> round(float(losses.multiclass_generalized_dice_loss(logits, targets)), 4)  # weighs the miss more
        0.3112

    References:
      Sudre, Li, Vercauteren, Ourselin, Cardoso, *Generalised Dice overlap as a deep learning loss
      function for highly unbalanced segmentations*, DLMIA 2017.
    """
    check_same_shape("multiclass_generalized_dice_loss", "predictions", predictions, "targets", targets)
    targets = jnp.asarray(targets)
    class_frequencies = jnp.sum(targets, axis=tuple(range(targets.ndim - 1)))
    class_weights = 1.0 / (class_frequencies**2 + 1e-7)
    class_weights = class_weights / jnp.sum(class_weights) * len(class_weights)
    per_class = dice_loss(
        predictions,
        targets,
        class_weights=class_weights,
        smooth=smooth,
        apply_softmax=apply_softmax,
        reduction="none",
        ignore_background=ignore_background,
    )
    return jnp.mean(per_class)


def binary_dice_loss(
    predictions: ArrayLike,
    targets: ArrayLike,
    *,
    smooth: ArrayLike = 1.0,
    apply_sigmoid: bool = True,
) -> jax.Array:
    r"""Dice loss of binary segmentation: the sigmoid of the logits against binary targets.

    `dice_loss` with one channel, :math:`\alpha = \beta = 1/2` and the mean reduction.

    Args:
      predictions: the logits, `[...]` or `[..., 1]`; probabilities when `apply_sigmoid` is False.
      targets: the binary targets, `[...]` or `[..., 1]`.
      smooth: the smoothing of the Dice ratio, which keeps it defined for empty masks.
      apply_sigmoid: whether `predictions` are logits (True) or probabilities (False).

    Returns:
      The loss of each example, `[batch]` (summed over the axes between the first and the last).

    Raises:
      ValueError: for shapes that differ.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits = jnp.array([[4.0, -4.0], [-4.0, 4.0]])  # two images of two pixels
        >>> targets = jnp.array([[1.0, 0.0], [1.0, 0.0]])  # the first image right, the second wrong
        >>> [round(v, 4) for v in losses.binary_dice_loss(logits, targets).tolist()]
        [0.009, 0.491]
    """
    predictions, targets = jnp.asarray(predictions), jnp.asarray(targets)
    if predictions.ndim == targets.ndim and predictions.shape[-1] != 1:
        predictions, targets = predictions[..., None], targets[..., None]
    return dice_loss(predictions, targets, smooth=smooth, apply_softmax=apply_sigmoid, reduction="mean")
