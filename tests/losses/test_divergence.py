"""The Kullback-Leibler divergences against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, mask, normal, simplex, uniform

optax = pytest.importorskip("optax")

LOG_P = jnp.log(simplex(0, (2, 3, 4)) + 0.01)
TARGETS = simplex(1, (2, 3, 4))  # with zeros: 0 log 0 = 0
CASES = (
    case(LOG_P, TARGETS),
    case(LOG_P, TARGETS, where=mask(2, (2, 3, 4))),
    case(LOG_P, TARGETS, axis=(0, 2)),
    case(LOG_P, TARGETS, axis=None),
    case(LOG_P[0].astype(jnp.bfloat16), TARGETS[0].astype(jnp.bfloat16)),
)


@pytest.mark.parametrize("name", ["kl_divergence", "generalized_kl_divergence"])
def test_kl_divergences(name):
    unnormalized = case(LOG_P, 2.0 * uniform(3, (2, 3, 4)))
    assert_same(getattr(losses, name), getattr(optax.losses, name), *CASES, unnormalized)


def test_kl_divergence_with_log_targets():
    log_targets = normal(4, (2, 3, 4))
    cases = [
        case(c.args[0], log_targets[: c.args[0].shape[0]].astype(c.args[0].dtype), **c.kwargs) for c in CASES
    ]
    cases.append(case(LOG_P, log_targets.at[0, 0, 0].set(-jnp.inf)))  # a target of 0
    assert_same(losses.kl_divergence_with_log_targets, optax.losses.kl_divergence_with_log_targets, *cases)


def test_convex_kl_divergence_warns_as_optax_does():
    with pytest.warns(
        DeprecationWarning, match="convex_kl_divergence is deprecated.*generalized_kl_divergence"
    ):
        got = losses.convex_kl_divergence(LOG_P, TARGETS, axis=1)
    with pytest.warns(DeprecationWarning):
        want = optax.losses.convex_kl_divergence(LOG_P, TARGETS, axis=1)
    assert jnp.array_equal(got, want)


def test_refusals():
    with pytest.raises(TypeError, match="`kl_divergence`: `targets` must have a floating"):
        losses.kl_divergence(LOG_P, jnp.zeros((2, 3, 4), jnp.int32))
    with pytest.raises(
        TypeError, match="`generalized_kl_divergence`: `log_predictions` must have a floating"
    ):
        losses.generalized_kl_divergence(jnp.zeros(3, jnp.int32), jnp.zeros(3))
    with pytest.raises(
        TypeError, match="`kl_divergence_with_log_targets`: `log_targets` must have a floating"
    ):
        losses.kl_divergence_with_log_targets(jnp.zeros(3), jnp.zeros(3, jnp.int32))
    with pytest.raises(TypeError):
        optax.losses.kl_divergence_with_log_targets(jnp.zeros(3), jnp.zeros(3, jnp.int32))
