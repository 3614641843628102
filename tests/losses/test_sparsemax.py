"""Sparsemax and Fenchel-Young losses against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from jax.scipy.special import logsumexp

from gradtx import losses
from tests.losses._shared import assert_same, case, integers, normal, simplex

optax = pytest.importorskip("optax")


def test_sparsemax_loss():
    logits = normal(0, (3, 4), scale=2.0)
    assert_same(
        losses.sparsemax_loss,
        optax.losses.sparsemax_loss,
        case(logits, integers(1, (3, 4), 2)),
        case(logits, integers(2, (3, 4), 2).astype(bool)),
    )


def test_multiclass_sparsemax_loss():
    scores = normal(3, (3, 4), scale=2.0)
    assert_same(
        losses.multiclass_sparsemax_loss,
        optax.losses.multiclass_sparsemax_loss,
        case(scores, integers(4, (3,), 4)),
        case(scores.at[0].set(jnp.array([5.0, -5.0, -5.0, -5.0])), jnp.array([0, 1, 2])),
        grad=(0,),
    )


def test_fenchel_young_loss():
    ours, theirs = losses.make_fenchel_young_loss(logsumexp), optax.losses.make_fenchel_young_loss(logsumexp)
    scores, targets = normal(5, (2, 3, 4)), simplex(6, (2, 3, 4))
    assert_same(ours, theirs, case(scores, targets), case(scores[0, 0], targets[0, 0]))
    # extra arguments go to the max function
    assert_same(ours, theirs, case(scores, targets, b=jnp.full(4, 2.0)))
