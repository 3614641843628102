"""gradtx/_algorithms/mechanic.py: Mechanic (`mechanize`) against optax.contrib's, 20 steps on the same
gradients, and its errors.

The gradients have a constant part (a bias) under the noise, so that the params travel and the distance
estimates grow. Each case runs gradtx's optimizer and optax's (jitted, 20 steps: every case of this file one
compiled program; eagerly, 5), and `gradtx.optax_compat`'s alias, whose state must equal optax's field by
field.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.optax_compat import _table_contrib as ox
from tests import helpers
from tests.algorithms import _shared

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}


def _problem(steps=helpers.STEPS, shapes=SHAPES):
    rng = np.random.default_rng(0)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    bias = {k: rng.standard_normal(s) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(bias[k] + 0.3 * rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
        for _ in range(steps)
    ]
    return params, grads


def _problem_for(name, steps=helpers.STEPS):
    return _problem(steps)


def _decaying(count):
    return 1.0 - 0.03 * count


# name: (gradtx's, optax_compat's, optax's)
CASES = {
    "mechanize": (
        lambda: gradtx.mechanize(gradtx.optax_compat.adam(1.0)),
        lambda: ox.mechanize(gradtx.optax_compat.adam(1.0)),
        lambda: optax.contrib.mechanize(optax.adam(1.0)),
    ),
    "mechanize-sgd-schedule-args": (
        lambda: gradtx.mechanize(gradtx.optax_compat.sgd(_decaying, 0.9), 0.1, 1e-6, 1e-4, 3),
        lambda: ox.mechanize(gradtx.optax_compat.sgd(_decaying, 0.9), 0.1, 1e-6, 1e-4, 3),
        lambda: optax.contrib.mechanize(optax.sgd(_decaying, 0.9), 0.1, 1e-6, 1e-4, 3),
    ),
}
TOL_ALL = {"rtol": 1e-6, "atol": 1e-6}
# A scheduled rate is checked each step (the step's updates times 1, or NaN out of range): XLA then fuses
# the last multiply-add otherwise than in optax's program, and mechanic's growing scale carries that
# rounding (2e-6 relative at step 20, one element of 24).
TOL = {"mechanize-sgd-schedule-args": {"rtol": 5e-6, "atol": 5e-6}}
EXTRA = {}  # no case takes extra arguments of `update` (Polyak's loss values: test_polyak.py)


@functools.cache
def _runs() -> dict:
    """Every case's 20 steps, gradtx's, optax_compat's and optax's, compiled as one program:
    `{name: (gradtx's trajectory, compat's state, optax's trajectory, optax's state)}`."""
    return _shared.lr_free_runs(CASES, _problem_for, EXTRA)


@pytest.mark.parametrize("name", CASES)
def test_twenty_jitted_steps_and_the_compat_state_equal_optax(name):
    actual, compat_state, expected, optax_state = _runs()[name]
    for t in range(helpers.STEPS):
        at = jax.tree.map(lambda x, t=t: x[t], (actual, expected))
        helpers.assert_trees_close(at[0], at[1], **TOL.get(name, TOL_ALL), msg=f"{name}: step {t + 1}")
    layout = str(jax.tree.structure(compat_state))  # the state classes' names and fields
    assert layout == str(jax.tree.structure(optax_state)), name
    helpers.assert_trees_close(compat_state, optax_state, rtol=1e-6, atol=1e-6, msg=f"{name}: state")


@pytest.mark.parametrize("name", [n for n in CASES if "-" not in n])
def test_five_eager_steps_equal_optax(name):
    """gradtx's optimizer stepped eagerly (op by op) against optax's jitted steps."""
    ours, _, _ = CASES[name]
    params, grads = _problem_for(name, steps=5)
    extra = EXTRA[name][:5] if name in EXTRA else None
    actual, _ = helpers.run(ours(), params, grads, extra_args_seq=extra)
    expected = _runs()[name][2]
    for t, a in enumerate(actual):
        e = jax.tree.map(lambda x, t=t: x[t], expected)
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"{name}: eager step {t + 1}")


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: gradtx.mechanize(gradtx.sgd(1.0), num_betas=0),
            r"`mechanize`: `num_betas` must be >= 1, got 0",
        ),
        (lambda: ox.mechanize(gradtx.sgd(1.0), eps=0.0), r"`mechanize`: `eps` must be > 0, got 0.0"),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: gradtx.mechanize(lambda g: g), r"`mechanize`: `tx` must be"),
    ],
)
def test_bad_types_are_refused_at_construction(make, match):
    with pytest.raises(TypeError, match=match):
        make()
