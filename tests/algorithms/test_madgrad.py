"""gradtx/_algorithms/madgrad.py: MADGRAD against optax.contrib's, 20 steps on the same gradients,
gradtx's name and optax_compat's (gradtx.optax_compat.contrib).

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
from gradtx.optax_compat import contrib as compat
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


# name: (gradtx, optax_compat, optax); each a function of no arguments building the optimizer
CASES = {
    "madgrad": (
        lambda: gradtx.madgrad(0.05),
        lambda: compat.madgrad(0.05),
        lambda: optax.contrib.madgrad(0.05),
    ),
    "madgrad-schedule-wd": (
        lambda: gradtx.madgrad(_decaying, 0.5, 0.1, 1e-4),
        lambda: compat.madgrad(_decaying, 0.5, 0.1, 1e-4),
        lambda: optax.contrib.madgrad(_decaying, 0.5, 0.1, 1e-4),
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


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (
            gradtx.madgrad,
            {"momentum": 1.0},
            ValueError,
            r"`madgrad`: `momentum` must be in \[0.0, 1.0\), got 1.0",
        ),
        (gradtx.madgrad, {"learning_rate": -0.1}, ValueError, r"`madgrad`: `learning_rate` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
