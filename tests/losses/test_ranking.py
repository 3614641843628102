"""The ranking softmax loss against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, integers, mask, normal, uniform

optax = pytest.importorskip("optax")


def test_ranking_softmax_loss():
    scores, labels = normal(0, (3, 4)), integers(1, (3, 4), 3)  # graded relevance, cast to float
    where = mask(2, (3, 4)).at[1].set(False)  # a list with no valid item
    nowhere = jnp.zeros((3, 4), bool)
    got = assert_same(
        losses.ranking_softmax_loss,
        optax.losses.ranking_softmax_loss,
        case(scores, labels),
        case(scores, labels, where=where),
        case(scores, labels, where=where, reduce_fn=jnp.sum),
        case(scores, labels, where=where, reduce_fn=None),
        case(scores, labels, weights=uniform(3, (3, 4))),
        case(scores[0], labels[0], reduce_fn=None),
        case(scores.astype(jnp.bfloat16), labels, where=where),
        case(scores, labels, where=nowhere),  # a mean over no list: 0, not NaN
        grad=(1,),
    )
    assert got[-1] == 0.0
    assert (got[4][1] == 0.0).all()  # unreduced: 0 for a list without valid items


def test_refusals():
    with pytest.raises(TypeError, match="`ranking_softmax_loss`: `logits` must have a floating"):
        losses.ranking_softmax_loss(jnp.zeros(3, jnp.int32), jnp.ones(3))
    with pytest.raises(TypeError):
        optax.losses.ranking_softmax_loss(jnp.zeros(3, jnp.int32), jnp.ones(3))
