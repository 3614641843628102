"""Softmax cross-entropy with probability and integer labels, the safe form and PolyLoss, against optax."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, integers, mask, normal, simplex

optax = pytest.importorskip("optax")


def test_softmax_cross_entropy():
    logits, labels = normal(0, (2, 3, 4)), simplex(1, (2, 3, 4))
    with_neg_inf = logits.at[0, 0, 1].set(-jnp.inf)
    assert_same(
        losses.softmax_cross_entropy,
        optax.losses.softmax_cross_entropy,
        case(logits, labels),
        case(logits, labels, where=mask(2, (2, 3, 4))),  # elements
        case(logits, labels, where=mask(3, (2, 3))),  # rows: expanded at `axis`
        case(logits, labels, axis=0, where=mask(4, (3, 4))),
        case(logits, labels, axis=(1, 2)),
        case(logits, labels, axis=None),
        case(normal(5, (3, 4), jnp.bfloat16), simplex(6, (3, 4))),
        case(with_neg_inf, jnp.ones((2, 3, 4)) / 4),  # -inf with a positive label: inf
        grad=(1, 7),
    )


def test_softmax_cross_entropy_with_integer_labels():
    logits, labels = normal(7, (2, 3, 4)), integers(8, (2, 3), 4)
    flat = integers(9, (2,), 12)  # a flat index into a (3, 4) slice
    assert_same(
        losses.softmax_cross_entropy_with_integer_labels,
        optax.losses.softmax_cross_entropy_with_integer_labels,
        case(logits, labels),
        case(logits, labels, where=mask(10, (2, 3, 4))),
        case(logits, labels.at[0, 0].set(0), where=mask(11, (2, 3)).at[0, 0].set(False)),  # a row out: 0
        case(logits, integers(12, (3, 4), 2), axis=0),
        case(logits, integers(13, (2, 4), 3), axis=-2, where=mask(14, (2, 4))),
        case(logits, flat, axis=(1, 2)),
        case(logits, flat, axis=(-1, 1), where=mask(15, (2, 3, 4))),
        case(logits, integers(16, (4,), 6), axis=(0, 1), where=mask(17, (2, 3, 4))),
        case(normal(18, (4, 6), jnp.bfloat16), integers(19, (4,), 6)),
        grad=(5,),
    )


def test_integer_and_one_hot_labels_agree():
    logits, labels = normal(0, (2, 3, 4)), integers(21, (2, 3), 4)  # the shapes above: compiled
    one_hot = jnp.eye(4)[labels]
    np.testing.assert_allclose(
        losses.softmax_cross_entropy_with_integer_labels(logits, labels),
        losses.softmax_cross_entropy(logits, one_hot),
        rtol=1e-6,  # the integer form skips the log-softmax: another order of operations
    )


def test_safe_softmax_cross_entropy():
    logits, labels = normal(22, (3, 4)), simplex(23, (3, 4))
    masked = logits.at[:, 0].set(-jnp.inf)
    assert_same(
        losses.safe_softmax_cross_entropy,
        optax.losses.safe_softmax_cross_entropy,
        case(logits, labels),
        case(masked, labels.at[:, 0].set(0.0)),  # 0 log 0 = 0, finite gradients
        case(normal(24, (2, 5), jnp.bfloat16), simplex(25, (2, 5))),
        grad=(1,),
    )
    assert np.isnan(losses.softmax_cross_entropy(masked, labels.at[:, 0].set(0.0))).all()
    assert np.isfinite(losses.safe_softmax_cross_entropy(masked, labels.at[:, 0].set(0.0))).all()


def test_poly_loss_cross_entropy():
    logits, labels = normal(26, (2, 3, 4)), simplex(27, (2, 3, 4))
    assert_same(
        losses.poly_loss_cross_entropy,
        optax.losses.poly_loss_cross_entropy,
        case(logits, labels),
        case(logits, labels, epsilon=-1.0, where=mask(28, (2, 3, 4))),
        case(logits, labels, epsilon=0.5, axis=1),
        case(logits, labels, axis=(0, 2)),
    )


def test_refusals():
    ce_int = losses.softmax_cross_entropy_with_integer_labels
    logits = jnp.zeros((2, 3))
    with pytest.raises(TypeError, match="`softmax_cross_entropy`: `logits` must have a floating"):
        losses.softmax_cross_entropy(jnp.zeros((2, 3), jnp.int32), jnp.zeros((2, 3)))
    with pytest.raises(TypeError, match="`labels` must have an integer dtype .* use `softmax_cross_entropy`"):
        ce_int(logits, jnp.zeros(2))
    with pytest.raises(TypeError):  # optax refuses float labels too
        optax.losses.softmax_cross_entropy_with_integer_labels(logits, jnp.zeros(2))
    with pytest.raises(ValueError, match="`axis` 2 is out of bounds for `logits` of rank 2"):
        ce_int(logits, jnp.zeros(2, jnp.int32), axis=2)
    with pytest.raises(ValueError):
        optax.losses.softmax_cross_entropy_with_integer_labels(logits, jnp.zeros(2, jnp.int32), axis=2)
    with pytest.raises(ValueError, match="`axis` must be an int or a tuple of ints, got None"):
        ce_int(logits, jnp.zeros(2, jnp.int32), axis=None)
    with pytest.raises(ValueError):
        optax.losses.softmax_cross_entropy_with_integer_labels(logits, jnp.zeros(2, jnp.int32), axis=None)
    with pytest.raises(TypeError, match="`poly_loss_cross_entropy`: `labels` must have a floating"):
        losses.poly_loss_cross_entropy(logits, jnp.zeros((2, 3), jnp.int32))
