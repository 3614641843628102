"""gradtx/_algorithms/adamax.py: `adamax` (tf.contrib.opt's AdaMaxOptimizer) against the float64 reference of
contrib's rule, and `adamaxw` against optax's.

AdaMax's building block with TF's scalar dtypes is checked with the rest of the Adam family in test_adam.py.
Here: AdaMax's numbers against tests/reference_contrib.py in float32 and float64, dense and row-sparse, and
its errors; AdaMaxW's 20 steps beside optax's on the same gradients (jitted: each library's cases one
compiled program; eagerly: 5 steps), gradtx's name and optax_compat's (whose state is optax's), and its
errors.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as optax_compat
from tests import helpers
from tests import reference_contrib as ref
from tests.algorithms import _shared

CONTRIB_CASES = {
    "adamax": (
        lambda: gradtx.adamax(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.adamax(0.05, 0.8, 0.95, 1e-3),
        ["m", "v"],
        None,
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


@SPARSE
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CONTRIB_CASES))
def test_matches_the_reference(name, sparse, x64):
    make_tx, make_ref, slots, extra = CONTRIB_CASES[name]
    helpers.compare_to_reference(
        make_tx, make_ref, sparse=sparse, x64=x64, slots=slots, extra_args=extra, atol32=5e-6
    )


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.adamax, {"b1": 1.0}, r"`adamax`: `b1` must be in \[0.0, 1.0\), got 1.0"),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


# --------------------------------------------------------------------------- AdaMaxW against optax

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
MASK = {"w": True, "b": False, "s": False}
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
    "adamaxw": (
        lambda: gradtx.adamaxw(0.05),
        lambda: optax_compat.adamaxw(0.05),
        lambda: optax.adamaxw(0.05),
    ),
    "adamaxw-schedule-mask": (
        lambda: gradtx.adamaxw(_decaying, 0.8, 0.99, 1e-6, 0.1, mask=MASK),
        lambda: optax_compat.adamaxw(_decaying, 0.8, 0.99, 1e-6, 0.1, mask=MASK),
        lambda: optax.adamaxw(_decaying, 0.8, 0.99, 1e-6, 0.1, mask=MASK),
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
        (gradtx.adamaxw, {"eps": -1.0}, ValueError, r"`adamaxw`: `eps` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
