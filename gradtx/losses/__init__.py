"""optax's losses, with optax's names, signatures and numbers (`optax.losses` of optax 0.2.8).

Each function takes optax's arguments, in optax's order, with optax's defaults and keyword-only
markers, and computes what optax computes with the same `jax.numpy` operations in the same order,
so the values (and their gradients) are optax's bit for bit. It refuses what optax refuses, with
the same exception types and a message that names the loss and the argument. gradtx does not
import optax.

Families: classification (`sigmoid_binary_cross_entropy`, `sigmoid_focal_loss`, the hinge and
perceptron losses), softmax cross-entropy (`softmax_cross_entropy`, its integer-label and
`0 log 0 = 0` forms, `poly_loss_cross_entropy`), the Kullback-Leibler divergences, CTC,
regression (`squared_error`, `l2_loss`, `huber_loss`, `log_cosh`, cosine similarity and
distance), ranking, segmentation (Dice), self-supervised (`ntxent`, `triplet_margin_loss`),
sparsemax and Fenchel-Young losses, and `smooth_labels`.

optax also binds some of them at its top level (`optax.l2_loss` is `optax.losses.l2_loss`);
`OPTAX_TOP_LEVEL` names those: convex_kl_divergence, cosine_distance, cosine_similarity,
ctc_loss, ctc_loss_with_forward_probs, generalized_kl_divergence, hinge_loss, huber_loss,
kl_divergence, l2_loss, log_cosh, ntxent, safe_softmax_cross_entropy,
sigmoid_binary_cross_entropy, sigmoid_focal_loss, smooth_labels, softmax_cross_entropy,
softmax_cross_entropy_with_integer_labels, squared_error. (optax 0.2.8 has no deprecated
top-level loss alias.) `convex_kl_divergence` is optax's deprecated name of
`generalized_kl_divergence`: it warns, as optax's does.

Where optax fails for reasons of its own, these do not: a Python scalar is accepted where optax
reads `.dtype` from it, and `dice_loss(..., apply_softmax=False)` checks that the probabilities
sum to 1 only outside `jax.jit` (optax's check cannot run under it) and only over several classes
(a single channel holds the probability of the positive class, which optax refuses unless it is 1).
"""

from gradtx.losses._classification import (
    hinge_loss,
    multiclass_hinge_loss,
    multiclass_perceptron_loss,
    perceptron_loss,
    sigmoid_binary_cross_entropy,
    sigmoid_focal_loss,
)
from gradtx.losses._cross_entropy import (
    poly_loss_cross_entropy,
    safe_softmax_cross_entropy,
    softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels,
)
from gradtx.losses._ctc import ctc_loss, ctc_loss_with_forward_probs
from gradtx.losses._divergence import (
    convex_kl_divergence,
    generalized_kl_divergence,
    kl_divergence,
    kl_divergence_with_log_targets,
)
from gradtx.losses._ranking import ranking_softmax_loss
from gradtx.losses._regression import (
    cosine_distance,
    cosine_similarity,
    huber_loss,
    l2_loss,
    log_cosh,
    squared_error,
)
from gradtx.losses._segmentation import binary_dice_loss, dice_loss, multiclass_generalized_dice_loss
from gradtx.losses._self_supervised import ntxent, triplet_margin_loss
from gradtx.losses._smoothing import smooth_labels
from gradtx.losses._sparsemax import make_fenchel_young_loss, multiclass_sparsemax_loss, sparsemax_loss

OPTAX_TOP_LEVEL = (
    "convex_kl_divergence",
    "cosine_distance",
    "cosine_similarity",
    "ctc_loss",
    "ctc_loss_with_forward_probs",
    "generalized_kl_divergence",
    "hinge_loss",
    "huber_loss",
    "kl_divergence",
    "l2_loss",
    "log_cosh",
    "ntxent",
    "safe_softmax_cross_entropy",
    "sigmoid_binary_cross_entropy",
    "sigmoid_focal_loss",
    "smooth_labels",
    "softmax_cross_entropy",
    "softmax_cross_entropy_with_integer_labels",
    "squared_error",
)
"""The losses that optax 0.2.8 also binds at its top level (`optax.<name>` is `optax.losses.<name>`)."""

__all__ = [
    "binary_dice_loss",
    "convex_kl_divergence",
    "cosine_distance",
    "cosine_similarity",
    "ctc_loss",
    "ctc_loss_with_forward_probs",
    "dice_loss",
    "generalized_kl_divergence",
    "hinge_loss",
    "huber_loss",
    "kl_divergence",
    "kl_divergence_with_log_targets",
    "l2_loss",
    "log_cosh",
    "make_fenchel_young_loss",
    "multiclass_generalized_dice_loss",
    "multiclass_hinge_loss",
    "multiclass_perceptron_loss",
    "multiclass_sparsemax_loss",
    "ntxent",
    "perceptron_loss",
    "poly_loss_cross_entropy",
    "ranking_softmax_loss",
    "safe_softmax_cross_entropy",
    "sigmoid_binary_cross_entropy",
    "sigmoid_focal_loss",
    "smooth_labels",
    "softmax_cross_entropy",
    "softmax_cross_entropy_with_integer_labels",
    "sparsemax_loss",
    "squared_error",
    "triplet_margin_loss",
]
