"""gradtx/_algorithms/optimistic.py: optimistic gradient descent and optimistic Adam against optax's, 20
steps on the same gradients, gradtx's names and optax_compat's (optax's deprecated `optimistic_adam`
interface and its `optimistic_adam_v2`).

Both libraries get the hyperparameters as users write them, Python floats. The jitted runs of every case are
one compiled program per library (a `lax.scan` of 20 steps per case); the eager runs take 5 steps, with the
defaults. The optax_compat aliases are compared with optax state and all (the same tree of state classes,
the same numbers).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as optax_compat
from tests.algorithms import _shared

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
STEPS = 20


def _problem(seed=0, steps=STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = {k: jnp.asarray(rng.standard_normal((steps, *s)), jnp.float32) for k, s in SHAPES.items()}
    return params, grads


def _decaying(count):
    return 0.1 * 0.9**count


def _deprecated(factory, *args):
    """`factory(*args)`, which warns that it is deprecated (optax's `optimistic_adam` does)."""
    with pytest.warns(DeprecationWarning, match="`optimistic_adam` is deprecated"):
        return factory(*args)


# name: (gradtx, optax_compat, optax); each a function of no arguments building the optimizer
CASES = {
    "optimistic_gradient_descent": (
        lambda: gradtx.optimistic_gradient_descent(0.05),
        lambda: optax_compat.optimistic_gradient_descent(0.05),
        lambda: optax.optimistic_gradient_descent(0.05),
    ),
    "optimistic_gradient_descent-alpha-beta": (
        lambda: gradtx.optimistic_gradient_descent(_decaying, 0.5, 2.0),
        lambda: optax_compat.optimistic_gradient_descent(_decaying, 0.5, 2.0),
        lambda: optax.optimistic_gradient_descent(_decaying, 0.5, 2.0),
    ),
    "optimistic_adam": (
        lambda: gradtx.optimistic_adam(0.05),
        lambda: optax_compat.optimistic_adam_v2(0.05),
        lambda: optax.optimistic_adam_v2(0.05),
    ),
    "optimistic_adam-no-nesterov": (
        lambda: gradtx.optimistic_adam(
            _decaying, alpha=0.5, beta=2.0, b1=0.8, b2=0.99, eps=1e-6, nesterov=False
        ),
        lambda: optax_compat.optimistic_adam_v2(
            _decaying, alpha=0.5, beta=2.0, b1=0.8, b2=0.99, eps=1e-6, nesterov=False
        ),
        lambda: optax.optimistic_adam_v2(
            _decaying, alpha=0.5, beta=2.0, b1=0.8, b2=0.99, eps=1e-6, nesterov=False
        ),
    ),
    "optimistic_adam-v1": (  # optax's deprecated interface: the rate is the optimistic gradient's alpha
        lambda: gradtx.optimistic_adam(1.0, alpha=0.05, beta=0.02, b1=0.8),
        lambda: optax_compat.optimistic_adam(0.05, 0.02, 0.8),
        lambda: _deprecated(optax.optimistic_adam, 0.05, 0.02, 0.8),
    ),
}
OWN_NOISE = set()  # the cases whose noise is gradtx's own (noisy_sgd's: test_sgd.py)


@functools.cache
def _jitted_runs():
    """Every case's three trajectories and final states, each library's cases compiled as one program."""
    return _shared.three_library_runs(CASES, _problem)


@pytest.mark.parametrize("name", CASES)
def test_twenty_jitted_steps_equal_optax(name):
    _shared.check_jitted_runs(_jitted_runs(), name, STEPS, own_noise=OWN_NOISE)


@pytest.mark.parametrize("name", [name for name in CASES if "-" not in name])  # the defaults
def test_five_eager_steps_equal_optax(name):
    _shared.check_eager_steps(name, CASES[name], _problem)


def test_optimistic_adam_v1_takes_no_schedule_as_optax():
    with pytest.raises(ValueError, match="does not support learning rate schedules"):
        optax_compat.optimistic_adam(_decaying)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (
            gradtx.optimistic_gradient_descent,
            {"beta": float("inf")},
            ValueError,
            r"`optimistic_gradient_descent`: `beta` must be finite",
        ),
        (gradtx.optimistic_adam, {"b2": 1.0}, ValueError, r"`optimistic_adam`: `b2` must be in \[0.0, 1.0\)"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
