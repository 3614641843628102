"""gradtx/_algorithms/adopt.py: ADOPT against optax.contrib's, 20 steps on the same gradients, gradtx's name
and optax_compat's (gradtx.optax_compat.contrib).

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
from gradtx.optax_compat import contrib as compat
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
        (gradtx.adopt, {"b2": 1.0}, ValueError, r"`adopt`: `b2` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.adopt, {"eps": float("nan")}, ValueError, r"`adopt`: `eps` must be finite"),
        (gradtx.adopt, {"nesterov": 1}, TypeError, r"`adopt`: `nesterov` must be True or False"),
        (gradtx.adopt, {"clip_value_fn": 0.5}, TypeError, r"`adopt`: `clip_value_fn` must be callable"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
