"""CTC loss and its forward probabilities against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, integers, normal

optax = pytest.importorskip("optax")

B, T, K, N = 2, 6, 4, 3
LOGITS = normal(0, (B, T, K))
LOGIT_PADDINGS = jnp.array([[0.0] * 6, [0.0] * 4 + [1.0] * 2])
LABELS = jnp.array([[1, 1, 2], [3, 2, 0]])  # a repeat in the first; the second padded on the right
LABEL_PADDINGS = jnp.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def test_ctc_losses():
    first = case(LOGITS, LOGIT_PADDINGS, LABELS, LABEL_PADDINGS)
    assert_same(
        losses.ctc_loss_with_forward_probs,
        optax.losses.ctc_loss_with_forward_probs,
        first,
        case(LOGITS, LOGIT_PADDINGS, (LABELS + 1) % K, LABEL_PADDINGS, blank_id=1, log_epsilon=-1e4),
        case(LOGITS.astype(jnp.bfloat16), LOGIT_PADDINGS, integers(1, (B, N), K), jnp.zeros((B, N))),
        grad=(0,),  # of the loss and the forward probabilities together
    )
    # `ctc_loss` is the first output of the above: compiled only (each eager scan compiles anew)
    assert_same(losses.ctc_loss, optax.losses.ctc_loss, first, eager=False)


def test_refusals():
    ctc = losses.ctc_loss
    with pytest.raises(ValueError, match=r"`ctc_loss_with_forward_probs`: `logits` must have rank 3"):
        ctc(LOGITS[0], LOGIT_PADDINGS, LABELS, LABEL_PADDINGS)
    with pytest.raises(ValueError):
        optax.losses.ctc_loss(LOGITS[0], LOGIT_PADDINGS, LABELS, LABEL_PADDINGS)
    with pytest.raises(ValueError, match="`labels` must have rank 2"):
        ctc(LOGITS, LOGIT_PADDINGS, LABELS[0], LABEL_PADDINGS)
    with pytest.raises(ValueError, match="`labels` and `label_paddings` must have the same shape"):
        ctc(LOGITS, LOGIT_PADDINGS, LABELS, LABEL_PADDINGS[:, :2])
    with pytest.raises(ValueError, match=r"`logit_paddings` must have the shape of `logits\[..., 0\]`"):
        ctc(LOGITS, LOGIT_PADDINGS[:, :5], LABELS, LABEL_PADDINGS)
    with pytest.raises(ValueError, match="`labels` must have the batch size of `logits`, 2; got 1"):
        ctc(LOGITS, LOGIT_PADDINGS, LABELS[:1], LABEL_PADDINGS[:1])
    with pytest.raises(ValueError):
        optax.losses.ctc_loss(LOGITS, LOGIT_PADDINGS, LABELS[:1], LABEL_PADDINGS[:1])
