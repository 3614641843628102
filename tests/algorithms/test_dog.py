"""gradtx/_algorithms/dog.py and dog_layerwise.py: DoG, DoWG and layer-wise DoG
(`scale_by_distance_over_gradients`) against optax's, 20 steps on the same gradients, 0-d leaves kept 0-d,
DoG's heuristic start, and their errors.

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
from gradtx import optax_compat
from gradtx.optax_compat import _table_contrib as oxd
from tests import helpers
from tests.algorithms import _shared

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
MASK = {"w": True, "b": False, "s": True}


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
    if name.split("-")[0] in NO_SCALARS:
        return _problem(steps, {k: s for k, s in SHAPES.items() if s})
    return _problem(steps)


def _decaying(count):
    return 1.0 - 0.03 * count


# name: (gradtx's, optax_compat's, optax's)
CASES = {
    "dog": (gradtx.dog, oxd.dog, optax.contrib.dog),
    "dog-first-rate-schedule-wd-mask": (
        lambda: gradtx.dog(_decaying, ("learning_rate", 0.05), 1e-6, 0.1, mask=MASK),
        lambda: oxd.dog(_decaying, ("learning_rate", 0.05), 1e-6, 0.1, MASK),
        lambda: optax.contrib.dog(_decaying, ("learning_rate", 0.05), 1e-6, 0.1, MASK),
    ),
    "dog-distance": (
        lambda: gradtx.dog(init_step=("distance", 0.1)),
        lambda: oxd.dog(init_step=("distance", 0.1)),
        lambda: optax.contrib.dog(init_step=("distance", 0.1)),
    ),
    "dowg": (gradtx.dowg, oxd.dowg, optax.contrib.dowg),
    "dowg-guess-schedule-wd-mask": (
        lambda: gradtx.dowg(_decaying, 0.5, 1e-6, 0.1, mask=MASK),
        lambda: oxd.dowg(_decaying, 0.5, 1e-6, 0.1, MASK),
        lambda: optax.contrib.dowg(_decaying, 0.5, 1e-6, 0.1, MASK),
    ),
    "ldog": (
        lambda: gradtx.chain(gradtx.scale_by_distance_over_gradients(), gradtx.scale_by_learning_rate(1.0)),
        lambda: gradtx.chain(
            optax_compat.scale_by_distance_over_gradients(), gradtx.scale_by_learning_rate(1.0)
        ),
        lambda: optax.chain(optax.scale_by_distance_over_gradients(), optax.scale_by_learning_rate(1.0)),
    ),
    "ldog-descent-args": (
        lambda: gradtx.scale_by_distance_over_gradients(1e-3, 1e-6, -0.5, param_dtype=None),
        lambda: optax_compat.scale_by_distance_over_gradients(1e-3, 1e-6, None, -0.5),
        lambda: optax.scale_by_distance_over_gradients(1e-3, 1e-6, None, -0.5),
    ),
}
NO_SCALARS = {
    "ldog"
}  # optax 0.2.8 turns a 0-d leaf's update into shape [1]: see test_layer_wise_dog_keeps_0d
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


def test_layer_wise_dog_keeps_0d_leaves_0d_with_optax_values():
    params, grads = _problem(steps=3)
    expected, _ = helpers.run(optax.scale_by_distance_over_gradients(global_scale=-1.0), params, grads)
    actual, _ = helpers.run(gradtx.scale_by_distance_over_gradients(global_scale=-1.0), params, grads)
    assert actual[-1]["s"].shape == () and expected[-1]["s"].shape == (1,)  # optax's reshape
    for a, e in zip(actual, expected, strict=True):
        helpers.assert_trees_close(jax.tree.map(np.ravel, a), jax.tree.map(np.ravel, e), rtol=1e-6, atol=1e-6)


def test_dog_heuristic_start_reads_the_params_norm_and_is_leaf_wise():
    params = {"a": jnp.array([3.0]), "b": jnp.array([[4.0]])}
    tx = gradtx.scale_by_dog(("heuristic", 0.1))
    np.testing.assert_allclose(tx.init(params).max_dist, 0.1 * (1 + 5.0), rtol=1e-6)
    assert not isinstance(tx, gradtx.ElementWise)  # ZeRO's slices would see part of the norm
    assert isinstance(gradtx.scale_by_dog(("distance", 0.1)), gradtx.ElementWise)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: gradtx.dog(init_step=("far", 1.0)), r"`dog`: `init_step\[0\]` must be one of .*'heuristic'"),
        (lambda: oxd.dog(init_step=("distance", -1.0)), r"`dog`: `init_step\[1\]` must be >= 0, got -1.0"),
        (lambda: gradtx.dowg(init_estim_sq_dist=-1.0), r"`dowg`: `init_estim_sq_dist` must be >= 0"),
        (lambda: gradtx.scale_by_distance_over_gradients(0.0), r"`reps_rel` must be > 0, got 0.0"),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: gradtx.dog(init_step=1e-6), r"`dog`: `init_step` must be a pair \(kind, value\)"),
        (lambda: gradtx.dowg(eps=lambda c: 1e-4), r"`dowg`: `eps` must be a number or a scalar array"),
    ],
)
def test_bad_types_are_refused_at_construction(make, match):
    with pytest.raises(TypeError, match=match):
        make()
