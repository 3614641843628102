"""gradtx/_algorithms/sam.py: `normalize` (SAM's adversarial step direction, optax.contrib's `normalize`)
against optax's, 20 steps on the same gradients (jitted, every case one compiled program: tests/helpers.py's
harness; eagerly, 5), under gradtx's name and `gradtx.optax_compat`'s, on real and complex params (SAM
itself: test_sam.py).
"""

from __future__ import annotations

import functools

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
COMPLEX = {"c": (3, 2), "d": (4,)}


def _complex_problem(seed=0, steps=helpers.STEPS):
    """Params and gradients with complex leaves (`c`, `d`) beside real ones (`w`, `b`)."""
    rng = np.random.default_rng(seed)

    def draw(shapes):
        real = {k: rng.standard_normal(s) for k, s in REAL.items()}
        cplx = {k: rng.standard_normal(s) + 1j * rng.standard_normal(s) for k, s in COMPLEX.items()}
        return {
            k: jnp.asarray(v, jnp.complex64 if k in COMPLEX else jnp.float32)
            for k, v in {**real, **cplx}.items()
        }

    return draw(None), [draw(None) for _ in range(steps)]


def _real_problem(seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()}
    return params, [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()} for _ in range(steps)
    ]


CASES = {
    "normalize-sgd": (
        _real_problem,
        lambda: gradtx.chain(gradtx.normalize(), ox.sgd(0.1)),
        lambda: optax.chain(optax.contrib.normalize(), optax.sgd(0.1)),
    ),
    "normalize-compat-complex": (
        _complex_problem,
        lambda: ox.chain(contrib.normalize(), ox.sgd(0.1)),
        lambda: optax.chain(optax.contrib.normalize(), optax.sgd(0.1)),
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
    "normalize-compat-complex",
]


@pytest.mark.parametrize("name", EAGER)
def test_five_steps_equal_optax_eagerly(name):
    """Op by op (one case per family; jit and eager agree for every entry: test_contract's own test)."""
    problem, ours, theirs = CASES[name]
    params, grads = problem(steps=5)
    actual, state = helpers.run(ours(), params, grads)
    expected, expected_state = helpers.run(_optax(theirs), params, grads)
    _compare(name, actual, state, expected, expected_state)
