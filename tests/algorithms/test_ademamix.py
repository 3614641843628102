"""gradtx/_algorithms/ademamix.py: AdEMAMix and simplified AdEMAMix against optax.contrib's, 20 steps on
the same gradients, gradtx's names and optax_compat's (gradtx.optax_compat.contrib).

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
MASK = {"w": True, "b": False, "s": False}
STEPS = 20


def _problem(seed=0, steps=STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = {k: jnp.asarray(rng.standard_normal((steps, *s)), jnp.float32) for k, s in SHAPES.items()}
    return params, grads


def _decaying(count):
    return 0.1 * 0.9**count


def _warmup(count):
    return jnp.minimum(1.0, (count + 1) / 10.0) * 0.999


# name: (gradtx, optax_compat, optax); each a function of no arguments building the optimizer
CASES = {
    "ademamix": (
        lambda: gradtx.ademamix(0.05),
        lambda: compat.ademamix(0.05),
        lambda: optax.contrib.ademamix(0.05),
    ),
    "ademamix-schedules-wd-mask": (
        lambda: gradtx.ademamix(_decaying, 0.8, 0.99, _warmup, 2.0, 1e-6, 1e-8, 0.1, mask=MASK),
        lambda: compat.ademamix(_decaying, 0.8, 0.99, _warmup, 2.0, 1e-6, 1e-8, weight_decay=0.1, mask=MASK),
        lambda: optax.contrib.ademamix(
            _decaying, 0.8, 0.99, _warmup, 2.0, 1e-6, 1e-8, weight_decay=0.1, mask=MASK
        ),
    ),
    "simplified_ademamix": (
        lambda: gradtx.simplified_ademamix(0.005),
        lambda: compat.simplified_ademamix(0.005),
        lambda: optax.contrib.simplified_ademamix(0.005),
    ),
    "simplified_ademamix-alpha-wd": (
        lambda: gradtx.simplified_ademamix(_decaying, 0.9, 0.99, 2.0, 1e-6, 1e-8, 0.05),
        lambda: compat.simplified_ademamix(_decaying, 0.9, 0.99, 2.0, 1e-6, 1e-8, 0.05),
        lambda: optax.contrib.simplified_ademamix(_decaying, 0.9, 0.99, 2.0, 1e-6, 1e-8, 0.05),
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


def test_all_are_element_wise_but_fromage_and_masked_decays():
    for make in (gradtx.ademamix, gradtx.simplified_ademamix, gradtx.adopt, gradtx.acprop, gradtx.madgrad):
        assert isinstance(make(0.1), gradtx.ElementWise), make
    for make in (gradtx.optimistic_gradient_descent, gradtx.optimistic_adam, gradtx.adamaxw):
        assert isinstance(make(0.1), gradtx.ElementWise), make
    assert not isinstance(gradtx.fromage(0.1), gradtx.ElementWise)  # a trust ratio per leaf
    assert not isinstance(gradtx.ademamix(0.1, mask=["w"]), gradtx.ElementWise)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (gradtx.ademamix, {"b3": 1.0}, ValueError, r"`ademamix`: `b3` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.ademamix, {"alpha": -1.0}, ValueError, r"`ademamix`: `alpha` must be >= 0"),
        (
            gradtx.ademamix,
            {"mu_dtype": jnp.int32},
            TypeError,
            r"`ademamix`: `mu_dtype` must be None or a float",
        ),
        (
            gradtx.simplified_ademamix,
            {"b1": 1.5},
            ValueError,
            r"`simplified_ademamix`: `b1` must be in \[0.0",
        ),
        (
            gradtx.simplified_ademamix,
            {"eps_root": -1.0},
            ValueError,
            r"`simplified_ademamix`: `eps_root` must be",
        ),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
