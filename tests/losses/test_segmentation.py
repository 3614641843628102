"""The Dice losses against optax's own."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_equal, assert_same, case, integers, normal

optax = pytest.importorskip("optax")

LOGITS = normal(0, (2, 3, 3, 4))  # batch, height, width, classes
TARGETS = jax.nn.one_hot(integers(1, (2, 3, 3), 4), 4)
BINARY_LOGITS, BINARY_TARGETS = normal(2, (2, 3, 3)), integers(3, (2, 3, 3), 2).astype(jnp.float32)


def test_dice_loss():
    assert_same(
        losses.dice_loss,
        optax.losses.dice_loss,
        case(LOGITS, TARGETS),
        case(LOGITS, TARGETS, alpha=0.3, beta=0.7, smooth=0.5, reduction="sum"),
        case(LOGITS, TARGETS, class_weights=jnp.array([0.1, 1.0, 2.0, 0.5]), reduction="none"),
        case(LOGITS, TARGETS, ignore_background=True, axis=(1,)),
        case(LOGITS, TARGETS, axis=(0, 1, 2)),
        case(BINARY_LOGITS, BINARY_TARGETS[..., None]),  # a channel added to the predictions
        case(BINARY_LOGITS[..., None], BINARY_TARGETS, ignore_background=True),  # and to the targets
        case(LOGITS.astype(jnp.bfloat16), TARGETS),
        grad=(0,),
    )


def test_dice_loss_of_probabilities():
    probs = jax.nn.softmax(LOGITS)
    ours, theirs = losses.dice_loss, optax.losses.dice_loss
    # optax checks the sums in Python, which fails under jit: compared eagerly; gradtx skips it under jit
    assert_equal(ours(probs, TARGETS, apply_softmax=False), theirs(probs, TARGETS, apply_softmax=False))
    assert_equal(
        jax.jit(lambda p: ours(p, TARGETS, apply_softmax=False))(probs),
        theirs(probs, TARGETS, apply_softmax=False),
    )
    with pytest.raises(ValueError, match="with `apply_softmax=False`, `predictions` must be probability"):
        ours(LOGITS, TARGETS, apply_softmax=False)
    with pytest.raises(ValueError):
        theirs(LOGITS, TARGETS, apply_softmax=False)


def test_binary_dice_loss_of_probabilities():
    # optax refuses a single channel of probabilities unless they are all 1 (it checks that the
    # channel "sums to 1"); gradtx takes them, and gives the loss of their logits
    probs = jax.nn.sigmoid(BINARY_LOGITS)
    with pytest.raises(ValueError):
        optax.losses.binary_dice_loss(probs, BINARY_TARGETS, apply_sigmoid=False)
    assert_equal(
        losses.binary_dice_loss(probs, BINARY_TARGETS, apply_sigmoid=False),
        losses.binary_dice_loss(BINARY_LOGITS, BINARY_TARGETS),
    )


@pytest.mark.parametrize("name", ["multiclass_generalized_dice_loss", "binary_dice_loss"])
def test_generalized_and_binary_dice_losses(name):
    ours, theirs = getattr(losses, name), getattr(optax.losses, name)
    if name == "binary_dice_loss":
        cases = [
            case(BINARY_LOGITS, BINARY_TARGETS),
            case(BINARY_LOGITS[..., None], BINARY_TARGETS[..., None]),
        ]
        cases.append(case(BINARY_LOGITS, BINARY_TARGETS, smooth=0.1))
    else:
        no_class_3 = jax.nn.one_hot(integers(4, (2, 3, 3), 3), 4)  # a class absent from the batch
        cases = [case(LOGITS, TARGETS), case(LOGITS, no_class_3, smooth=0.5, ignore_background=True)]
    assert_same(ours, theirs, *cases)


def test_refusals():
    with pytest.raises(
        ValueError, match="`dice_loss`: `reduction` must be one of 'mean', 'sum', 'none'; got 'max'"
    ):
        losses.dice_loss(LOGITS, TARGETS, reduction="max")
    with pytest.raises(ValueError):
        optax.losses.dice_loss(LOGITS, TARGETS, reduction="max")
    with pytest.raises(
        ValueError, match=r"`dice_loss`: `predictions` and `targets` must have the same shape"
    ):
        losses.dice_loss(LOGITS, TARGETS[..., :3])
    with pytest.raises(ValueError, match="`dice_loss`: `class_weights` must have rank 1"):
        losses.dice_loss(LOGITS, TARGETS, class_weights=jnp.ones((1, 4)))
    with pytest.raises(ValueError):
        optax.losses.dice_loss(LOGITS, TARGETS, class_weights=jnp.ones((1, 4)))
    with pytest.raises(ValueError, match="`multiclass_generalized_dice_loss`: `predictions` and `targets`"):
        losses.multiclass_generalized_dice_loss(LOGITS, TARGETS[0])
