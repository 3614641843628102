"""Sigmoid cross-entropy, focal, hinge and perceptron losses against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, integers, normal, uniform

optax = pytest.importorskip("optax")


def test_sigmoid_binary_cross_entropy():
    logits, bf16 = normal(0, (3, 4), scale=3.0), normal(0, (3, 4), jnp.bfloat16, scale=3.0)
    assert_same(
        losses.sigmoid_binary_cross_entropy,
        optax.losses.sigmoid_binary_cross_entropy,
        case(logits, uniform(2, (3, 4))),  # probabilities
        case(logits, integers(1, (3, 4), 2)),  # {0, 1} integers, cast to the logits' dtype
        case(logits[:, :1], uniform(3, (3, 4))),  # broadcast
        case(bf16, uniform(2, (3, 4))),
        case(jnp.array([-jnp.inf, 0.0, jnp.inf]), jnp.array([0.0, 1.0, 1.0])),
    )


def test_sigmoid_focal_loss():
    logits, labels = normal(4, (3, 4), scale=4.0), uniform(5, (3, 4))  # shapes shared: compiled once
    hard = (labels > 0.5).astype(jnp.int32)
    assert_same(
        losses.sigmoid_focal_loss,
        optax.losses.sigmoid_focal_loss,
        case(logits, labels, alpha=0.25, gamma=1.5),
        case(logits, labels),
        case(logits, hard, alpha=0.75, gamma=0.0),
        case(normal(6, (7,), jnp.bfloat16, scale=3.0), uniform(7, (7,)), alpha=0.25),
        grad=(0, 3),
    )


def test_hinge_and_perceptron_losses():
    scores, targets = normal(8, (3, 4)), 2.0 * integers(9, (3, 4), 2) - 1.0
    hinge = case(scores, targets), case(scores, targets[0])  # the second broadcasts
    assert_same(losses.hinge_loss, optax.losses.hinge_loss, *hinge)
    assert_same(losses.perceptron_loss, optax.losses.perceptron_loss, case(scores, targets))


@pytest.mark.parametrize("name", ["multiclass_hinge_loss", "multiclass_perceptron_loss"])
def test_multiclass_margin_losses(name):
    assert_same(
        getattr(losses, name),
        getattr(optax.losses, name),
        case(normal(10, (3, 4)), integers(11, (3,), 4)),
        case(normal(12, (2, 3, 5)), integers(12, (2, 3), 5)),
        case(normal(12, (5,)), jnp.array(3)),
        case(normal(13, (4, 6), jnp.bfloat16), integers(14, (4,), 6)),
    )


def test_refusals():
    with pytest.raises(TypeError, match="`sigmoid_binary_cross_entropy`: `logits` must have a floating"):
        losses.sigmoid_binary_cross_entropy(jnp.array([1, 2]), jnp.array([0, 1]))
    with pytest.raises(TypeError):  # optax refuses it too
        optax.losses.sigmoid_binary_cross_entropy(jnp.array([1, 2]), jnp.array([0, 1]))
    with pytest.raises(TypeError, match="`sigmoid_focal_loss`: `logits` must have a floating"):
        losses.sigmoid_focal_loss(jnp.array([1]), jnp.array([1]))
    with pytest.raises(ValueError, match=r"`perceptron_loss`: .* same shape, got \(3,\) and \(1,\)"):
        losses.perceptron_loss(jnp.zeros(3), jnp.ones(1))
    with pytest.raises(ValueError):
        optax.losses.perceptron_loss(jnp.zeros(3), jnp.ones(1))
