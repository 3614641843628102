"""gradtx/_algorithms/fromage.py: Fromage against optax's, 20 steps on the same gradients, gradtx's name
and optax_compat's.

Both libraries get the hyperparameters as users write them, Python floats. The jitted runs of every case are
one compiled program per library (a `lax.scan` of 20 steps per case); the eager runs take 5 steps, with the
defaults. The optax_compat aliases are compared with optax state and all (the same tree of state classes,
the same numbers).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as optax_compat
from tests import helpers
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
    "fromage": (
        lambda: gradtx.fromage(0.05),
        lambda: optax_compat.fromage(0.05),
        lambda: optax.fromage(0.05),
    ),
    "fromage-schedule-min-norm": (
        lambda: gradtx.fromage(_decaying, 0.5),
        lambda: optax_compat.fromage(_decaying, 0.5),
        lambda: optax.fromage(_decaying, 0.5),
    ),
}
OWN_NOISE = set()  # the cases whose noise is gradtx's own (noisy_sgd's: test_sgd.py)


@functools.cache
def _jitted_runs():
    """Every case's three trajectories and final states, each library's cases compiled as one program."""
    return _shared.three_library_runs(CASES, _problem)


def _assert_close(actual, expected, msg):
    helpers.assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6, msg=msg)


@pytest.mark.parametrize("name", CASES)
def test_twenty_jitted_steps_equal_optax(name):
    runs = _jitted_runs()
    expected, optax_state = runs[2][name]
    for lib, label in ((0, "gradtx"), (1, "optax_compat")):
        trajectory, _ = runs[lib][name]
        for t in range(STEPS):
            step = jax.tree.map(lambda x, t=t: x[t], (trajectory, expected))
            _assert_close(*step, msg=f"{name} ({label}): step {t + 1}")
    # optax_compat's state is optax's: the same classes, fields and numbers
    compat_state = runs[1][name][1]
    assert str(jax.tree.structure(compat_state)) == str(jax.tree.structure(optax_state))
    if name in OWN_NOISE:
        compat_state, optax_state = (jax.tree.map(np.shape, s) for s in (compat_state, optax_state))
    _assert_close(compat_state, optax_state, msg=f"{name}: state")


@pytest.mark.parametrize("name", [name for name in CASES if "-" not in name])  # the defaults
def test_five_eager_steps_equal_optax(name):
    params, grads = _problem()
    grads = [jax.tree.map(lambda g, t=t: g[t], grads) for t in range(5)]
    ours, _, theirs = CASES[name]
    actual, _ = helpers.run(ours(), params, grads)
    expected, _ = helpers.run(theirs(), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        _assert_close(a, e, msg=f"{name}: step {t + 1}")


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (gradtx.fromage, {"learning_rate": -0.1}, ValueError, r"`fromage`: `learning_rate` must be >= 0"),
        (gradtx.fromage, {"min_norm": -1.0}, ValueError, r"`fromage`: `min_norm` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
