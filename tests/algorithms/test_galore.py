"""gradtx/_algorithms/galore.py: GaLore against optax.contrib's, 20 steps on the same gradients (jitted, every
case one compiled program: tests/helpers.py's harness; eagerly, 5), under gradtx's names and
`gradtx.optax_compat`'s (whose state is optax's), and the errors at construction of optax.contrib's GaLore,
`split_real_and_imaginary`, `differentially_private_aggregate` / `dpsgd` and `schedule_free`.
"""

from __future__ import annotations

import functools

import jax
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


def _galore_problem(seed=0, steps=helpers.STEPS):
    """Matrices taller and wider than the rank, a 3-D tensor and a vector (never projected)."""
    rng = np.random.default_rng(seed)
    shapes = {"w": (6, 4), "v": (3, 7), "t": (4, 2, 3), "b": (5,)}

    def draw():
        return {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}

    return draw(), [draw() for _ in range(steps)]


def _dims(cls):
    """Dimension numbers: `w` as it is, `v` left whole, `t`'s axes 0 and 2 as the rows."""
    return {"w": cls(), "v": None, "t": cls((0, 2), 1), "b": None}


GALORE_MASK = {"w": True, "v": False, "t": True, "b": False}


def _decaying(count):
    return 0.1 * 0.9**count


CASES = {
    "galore": (
        _galore_problem,
        lambda: gradtx.galore(0.05, rank=2, update_proj_gap=5),
        lambda: optax.contrib.galore(0.05, rank=2, update_proj_gap=5),
    ),
    "galore-compat-lion-dims-decay-mask": (
        _galore_problem,
        lambda: contrib.galore(
            _decaying, 3, 3, 0.5, ox.scale_by_lion(), 0.1, GALORE_MASK, _dims(contrib.GaLoreDimensionNumbers)
        ),
        lambda: optax.contrib.galore(
            _decaying,
            3,
            3,
            0.5,
            optax.scale_by_lion(),
            0.1,
            GALORE_MASK,
            _dims(optax.contrib.GaLoreDimensionNumbers),
        ),
    ),
    "scale_by_galore-compat": (
        _galore_problem,
        lambda: ox.chain(contrib.scale_by_galore(rank=2, update_proj_gap=4), ox.sgd(0.05)),
        lambda: optax.chain(optax.contrib.scale_by_galore(rank=2, update_proj_gap=4), optax.sgd(0.05)),
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
    "galore-compat-lion-dims-decay-mask",
]


@pytest.mark.parametrize("name", EAGER)
def test_five_steps_equal_optax_eagerly(name):
    """Op by op (one case per family; jit and eager agree for every entry: test_contract's own test)."""
    problem, ours, theirs = CASES[name]
    params, grads = problem(steps=5)
    actual, state = helpers.run(ours(), params, grads)
    expected, expected_state = helpers.run(_optax(theirs), params, grads)
    _compare(name, actual, state, expected, expected_state)


def test_bad_arguments_are_refused_at_construction():
    with pytest.raises(TypeError, match="`split_real_and_imaginary`: `inner`"):
        gradtx.split_real_and_imaginary(0.1)
    with pytest.raises(TypeError, match="`differentially_private_aggregate`: `key` must be a typed PRNG key"):
        gradtx.differentially_private_aggregate(1.0, 0.5, key=3)
    with pytest.raises(TypeError, match="with `key`, `l2_norm_clip` must be a number or an array"):
        gradtx.differentially_private_aggregate(_decaying, 0.5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`differentially_private_aggregate`: `noise_multiplier`"):
        gradtx.differentially_private_aggregate(1.0, -0.5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`dpsgd`: `noise_multiplier`"):
        contrib.dpsgd(0.1, 1.0, -0.5, seed=0)
    with pytest.raises(ValueError, match="`galore`: `rank` must be"):
        gradtx.galore(0.1, rank=0)
    with pytest.raises(TypeError, match="`scale_by_galore`: `rank` must be"):
        contrib.scale_by_galore(rank=2.5)
    with pytest.raises(ValueError, match="`galore`: `update_proj_gap` must be"):
        contrib.galore(0.1, update_proj_gap=0)
    with pytest.raises(TypeError, match="`scale_by_galore`: `base_optimizer`"):
        gradtx.scale_by_galore(base_optimizer="adam")
    with pytest.raises(TypeError, match="`scale_by_galore`: `weight_dimension_numbers` must be None"):
        gradtx.scale_by_galore(weight_dimension_numbers=3)
    bad_dims = gradtx.scale_by_galore(weight_dimension_numbers=gradtx.GaLoreDimensionNumbers(0, 0))
    with pytest.raises(
        ValueError, match=r"must split the axes of shape \(4, 2, 3\) into two disjoint groups"
    ):
        bad_dims.init(_galore_problem(steps=0)[0])
    with pytest.raises(TypeError, match="`schedule_free`: `tx`"):
        gradtx.schedule_free("sgd", 0.1)
    with pytest.raises(ValueError, match="`schedule_free`: `b1`"):
        contrib.schedule_free(ox.sgd(0.1), 0.1, b1=0.0)
    with pytest.raises(TypeError, match="`schedule_free`: `state_dtype`"):
        contrib.schedule_free(ox.sgd(0.1), 0.1, state_dtype=jnp.int32)
