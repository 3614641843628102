"""gradtx/_algorithms/dadapt.py: D-Adapted AdamW against optax.contrib's, 20 steps on the same gradients, and
its errors (its distance estimate is checked beside Prodigy's in test_prodigy.py).

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
    "dadapt_adamw": (gradtx.dadapt_adamw, ox.dadapt_adamw, optax.contrib.dadapt_adamw),
    "dadapt_adamw-schedule-wd": (
        lambda: gradtx.dadapt_adamw(_decaying, 0.8, 0.99, 1e-6, 1e-4, 0.1),
        lambda: ox.dadapt_adamw(_decaying, (0.8, 0.99), 1e-6, 1e-4, 0.1),
        lambda: optax.contrib.dadapt_adamw(_decaying, (0.8, 0.99), 1e-6, 1e-4, 0.1),
    ),
}
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
        helpers.assert_trees_close(at[0], at[1], rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")
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
        (lambda: gradtx.dadapt_adamw(weight_decay=-0.1), r"`dadapt_adamw`: `weight_decay` must be >= 0"),
        (lambda: ox.dadapt_adamw(betas=(0.9, 1.5)), r"`dadapt_adamw`: `b2` must be in \[0.0, 1.0\)"),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, match):
    with pytest.raises(ValueError, match=match):
        make()
