"""NT-Xent and the triplet margin loss against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, normal

optax = pytest.importorskip("optax")


def test_ntxent():
    embeddings, labels = normal(0, (6, 3)), jnp.array([0, 0, 1, 1, 2, 2])
    assert_same(
        losses.ntxent,
        optax.losses.ntxent,
        case(embeddings, labels),
        case(embeddings.astype(jnp.bfloat16), jnp.array([0, 1, 0, 1, 1, 2]), temperature=0.5),
        grad=(0,),
    )


def test_triplet_margin_loss():
    a, p, n = normal(1, (3, 4)), normal(2, (3, 4)), normal(3, (3, 4))
    assert_same(
        losses.triplet_margin_loss,
        optax.losses.triplet_margin_loss,
        case(a, p, n),
        case(a, p, n, axis=0, norm_degree=4, margin=0.5, eps=1e-3),
        case(a.astype(jnp.bfloat16), p.astype(jnp.bfloat16), n.astype(jnp.bfloat16)),
    )


def test_refusals():
    with pytest.raises(
        ValueError, match="`ntxent`: `labels` must have the leading size of `embeddings`, 6; got 5"
    ):
        losses.ntxent(normal(0, (6, 3)), jnp.zeros(5, jnp.int32))
    with pytest.raises(ValueError):
        optax.losses.ntxent(normal(0, (6, 3)), jnp.zeros(5, jnp.int32))
    with pytest.raises(TypeError, match="`ntxent`: `embeddings` must have a floating"):
        losses.ntxent(jnp.zeros((2, 3), jnp.int32), jnp.zeros(2, jnp.int32))
    with pytest.raises(TypeError, match="`triplet_margin_loss`: `negatives` must have a floating"):
        losses.triplet_margin_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros((2, 3), jnp.int32))
    with pytest.raises(TypeError):
        optax.losses.triplet_margin_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros((2, 3), jnp.int32))
