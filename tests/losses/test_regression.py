"""Squared error, L2, Huber, log-cosh and the cosine losses against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, mask, normal

optax = pytest.importorskip("optax")

P, T = normal(0, (3, 4), scale=2.0), normal(1, (3, 4), scale=2.0)
P16, T16 = P.astype(jnp.bfloat16), T.astype(jnp.bfloat16)


@pytest.mark.parametrize("name", ["squared_error", "l2_loss", "huber_loss", "log_cosh"])
def test_elementwise_losses(name):
    cases = [case(P, T), case(P), case(P16, T16)]
    if name == "huber_loss":
        cases += [case(P, T, delta=0.5), case(P, T[0], delta=2.0)]  # huber broadcasts the targets
    if name == "log_cosh":
        cases.append(case(P, T[:1]))
    assert_same(
        getattr(losses, name), getattr(optax.losses, name), *cases, grad=(0,) if name == "huber_loss" else ()
    )


@pytest.mark.parametrize("name", ["cosine_similarity", "cosine_distance"])
def test_cosine_losses(name):
    zero = P.at[0].set(0.0)  # a zero vector: NaN without epsilon
    assert_same(
        getattr(losses, name),
        getattr(optax.losses, name),
        case(P, T),
        case(zero, T),
        case(zero, T, epsilon=1e-6),
        case(P, T, axis=0),
        case(P, T, axis=None, where=mask(2, (3, 4))),
        case(P16, T16),
        grad=(4,),
    )


def test_refusals():
    with pytest.raises(TypeError, match="`l2_loss`: `predictions` must have a floating"):
        losses.l2_loss(jnp.array([1, 2]))
    with pytest.raises(TypeError):
        optax.losses.l2_loss(jnp.array([1, 2]))
    with pytest.raises(ValueError, match=r"`squared_error`: .* same shape, got \(3, 4\) and \(4,\)"):
        losses.squared_error(P, T[0])
    with pytest.raises(ValueError):
        optax.losses.squared_error(P, T[0])
    with pytest.raises(TypeError, match="`huber_loss`: `predictions` must have a floating"):
        losses.huber_loss(jnp.array([1, 2]))
    with pytest.raises(TypeError, match="`cosine_distance`: `targets` must have a floating"):
        losses.cosine_distance(P, jnp.ones((3, 4), jnp.int32))
