"""gradtx/_algorithms/adopt.py: ADOPT against optax.contrib's, 20 steps on the same gradients, gradtx's name
and optax_compat's (gradtx.optax_compat.contrib).

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


def _clip_bound(count):
    return 0.5 + 0.1 * count


# name: (gradtx, optax_compat, optax); each a function of no arguments building the optimizer
CASES = {
    "adopt": (
        lambda: gradtx.adopt(0.05),
        lambda: compat.adopt(0.05),
        lambda: optax.contrib.adopt(0.05),
    ),
    "adopt-nesterov-no-clipping": (
        lambda: gradtx.adopt(_decaying, 0.8, 0.99, 1e-4, nesterov=True, use_clipping=False),
        lambda: compat.adopt(_decaying, 0.8, 0.99, 1e-4, nesterov=True, use_clipping=False),
        lambda: optax.contrib.adopt(_decaying, 0.8, 0.99, 1e-4, nesterov=True, use_clipping=False),
    ),
    "adopt-clip-fn": (
        lambda: gradtx.adopt(0.05, clip_value_fn=_clip_bound),
        lambda: compat.adopt(0.05, clip_value_fn=_clip_bound),
        lambda: optax.contrib.adopt(0.05, clip_value_fn=_clip_bound),
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
        (gradtx.adopt, {"b2": 1.0}, ValueError, r"`adopt`: `b2` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.adopt, {"eps": float("nan")}, ValueError, r"`adopt`: `eps` must be finite"),
        (gradtx.adopt, {"nesterov": 1}, TypeError, r"`adopt`: `nesterov` must be True or False"),
        (gradtx.adopt, {"clip_value_fn": 0.5}, TypeError, r"`adopt`: `clip_value_fn` must be callable"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
