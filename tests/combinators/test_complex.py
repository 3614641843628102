"""gradtx/combinators/_complex.py: split_real_and_imaginary against optax.contrib's, 20 steps on the same
gradients (jitted, every case one compiled program: tests/helpers.py's harness; eagerly, 5), under gradtx's
name and `gradtx.optax_compat`'s; the states of optax_compat's contrib names (this one, `normalize`,
`differentially_private_aggregate`) as optax's layouts; the real leaves kept and each part stepped on its own.
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


def _decaying(count):
    return 0.1 * 0.9**count


CASES = {
    "split_real_and_imaginary-adam": (
        _complex_problem,
        lambda: gradtx.split_real_and_imaginary(ox.adam(0.05)),
        lambda: optax.contrib.split_real_and_imaginary(optax.adam(0.05)),
    ),
    "split_real_and_imaginary-compat-momentum-schedule": (
        _complex_problem,
        lambda: contrib.split_real_and_imaginary(ox.sgd(_decaying, momentum=0.9, nesterov=True)),
        lambda: optax.contrib.split_real_and_imaginary(optax.sgd(_decaying, momentum=0.9, nesterov=True)),
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
    "split_real_and_imaginary-adam",
]


@pytest.mark.parametrize("name", EAGER)
def test_five_steps_equal_optax_eagerly(name):
    """Op by op (one case per family; jit and eager agree for every entry: test_contract's own test)."""
    problem, ours, theirs = CASES[name]
    params, grads = problem(steps=5)
    actual, state = helpers.run(ours(), params, grads)
    expected, expected_state = helpers.run(_optax(theirs), params, grads)
    _compare(name, actual, state, expected, expected_state)


def test_compat_states_are_optax_layouts():
    params = _complex_problem(steps=0)[0]
    state = contrib.split_real_and_imaginary(ox.adam(0.1)).init(params)
    assert type(state).__name__ == "SplitRealAndImaginaryState" and state.inner_state[0].mu[
        "c"
    ].real.shape == (3, 2)
    assert contrib.NormalizeState() == ox.EmptyState() == contrib.normalize().init(params)
    dp = contrib.differentially_private_aggregate(1.0, 0.5, key=jax.random.key(0)).init(params)
    assert isinstance(dp, contrib.DifferentiallyPrivateAggregateState) and dp._fields == ("rng_key",)
    assert jax.random.key_data(dp.rng_key).tolist() == jax.random.key_data(jax.random.key(0)).tolist()


def test_split_keeps_real_leaves_and_steps_each_part_on_its_own():
    """sign_sgd on the split parts steps each of the real and imaginary parts by -lr sign."""
    params = {"c": jnp.array([1.0 + 1.0j, -2.0j]), "r": jnp.array([3.0])}
    grads = {"c": jnp.array([2.0 - 0.5j, -1.0 + 4.0j], jnp.complex64), "r": jnp.array([-7.0])}
    tx = gradtx.split_real_and_imaginary(gradtx.sign_sgd(0.5))
    out, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_array_equal(out["c"], np.array([-0.5 + 0.5j, 0.5 - 0.5j], np.complex64))
    np.testing.assert_array_equal(out["r"], np.array([0.5], np.float32))
    assert out["c"].dtype == jnp.complex64 and out["r"].dtype == jnp.float32
