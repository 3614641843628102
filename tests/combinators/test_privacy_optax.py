"""gradtx/combinators/_privacy.py: differentially_private_aggregate and optax_compat's `dpsgd` (built on it)
against optax.contrib's, 20 steps on the same per-example gradients with the same keys and noise (jitted,
every case one compiled program: tests/helpers.py's harness; eagerly, 5), and optax_compat's key arguments
(the per-example clipping and the noise itself: test_privacy.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx import optax_compat as ox
from gradtx.optax_compat import contrib
from tests import helpers
from tests.helpers import call_optax as _optax
from tests.helpers import compare_contrib_run as _compare
from tests.helpers import unstack_steps as _unstack

REAL = {"w": (4, 3), "b": (5,)}
BATCH = 6


def _per_example_problem(seed=0, steps=helpers.STEPS):
    """Params and per-example gradients `[BATCH, *shape]` of mixed norms (some clipped, some not)."""
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()}

    def grads():
        scale = rng.uniform(0.05, 3.0, BATCH)
        return {
            k: jnp.asarray(
                rng.standard_normal((BATCH, *s)) * scale.reshape((-1,) + (1,) * len(s)), jnp.float32
            )
            for k, s in REAL.items()
        }

    return params, [grads() for _ in range(steps)]


def _decaying(count):
    return 0.1 * 0.9**count


CASES = {
    "differentially_private_aggregate": (
        _per_example_problem,
        lambda: gradtx.chain(
            gradtx.differentially_private_aggregate(1.0, 0.5, key=jax.random.key(3)), ox.sgd(0.1)
        ),
        lambda: optax.chain(
            optax.contrib.differentially_private_aggregate(1.0, 0.5, key=jax.random.key(3)), optax.sgd(0.1)
        ),
    ),
    "differentially_private_aggregate-compat-int-key": (
        _per_example_problem,
        lambda: ox.chain(contrib.differentially_private_aggregate(0.3, 1.5, 11), ox.sgd(0.1)),
        lambda: optax.chain(optax.contrib.differentially_private_aggregate(0.3, 1.5, 11), optax.sgd(0.1)),
    ),
    "dpsgd": (
        _per_example_problem,
        lambda: contrib.dpsgd(0.1, 1.0, 0.5, seed=5),
        lambda: optax.contrib.dpsgd(0.1, 1.0, 0.5, seed=5),
    ),
    "dpsgd-nesterov-momentum": (
        _per_example_problem,
        lambda: contrib.dpsgd(_decaying, 2.0, 0.8, seed=1, momentum=0.9, nesterov=True),
        lambda: optax.contrib.dpsgd(_decaying, 2.0, 0.8, seed=1, momentum=0.9, nesterov=True),
    ),
}


@functools.cache
def _jitted_runs():
    """Every case's 20 steps, gradtx's and optax's, in one compiled program (one compilation for all)."""
    return helpers.contrib_jitted_runs(CASES)


@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax_jitted(name):
    (ours, state), (theirs, their_state) = _jitted_runs()[name]
    _compare(name, _unstack(ours), state, _unstack(theirs), their_state)


EAGER = [
    "differentially_private_aggregate",
    "dpsgd-nesterov-momentum",
]


@pytest.mark.parametrize("name", EAGER)
def test_five_steps_equal_optax_eagerly(name):
    """Op by op (one case per family; jit and eager agree for every entry: test_contract's own test)."""
    problem, ours, theirs = CASES[name]
    params, grads = problem(steps=5)
    actual, state = helpers.run(ours(), params, grads)
    expected, expected_state = helpers.run(_optax(theirs), params, grads)
    _compare(name, actual, state, expected, expected_state)


def test_compat_dp_key_arguments_follow_optax():
    with pytest.warns(UserWarning, match="Specifying a key"):
        state = contrib.differentially_private_aggregate(1.0, 0.5).init(None)
    assert jax.random.key_data(state.rng_key).tolist() == jax.random.key_data(jax.random.key(0)).tolist()
    with pytest.warns(DeprecationWarning, match="seed"):
        state = contrib.differentially_private_aggregate(1.0, 0.5, seed=4).init(None)
    assert jax.random.key_data(state.rng_key).tolist() == jax.random.key_data(jax.random.key(4)).tolist()
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="only one of `seed` and `key`"):
        contrib.differentially_private_aggregate(1.0, 0.5, key=1, seed=4)
