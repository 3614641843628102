"""bfloat16 kept unbiased: stochastic rounding, bfloat16 + int8 correction slots, bfloat16 params.

A moment that moves by less than half a bfloat16 step per step never moves when rounded to nearest;
these tests measure that it does with either format, and how close each stays to float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import checkpoint
from gradtx._core import rounding
from tests import helpers


def _neighbours(x):
    """The bfloat16 values at or below and at or above each float32 value."""
    down = jnp.asarray(x).astype(jnp.bfloat16)
    below = jnp.where(down.astype(jnp.float32) > x, jnp.nextafter(down, -jnp.inf), down)
    above = jnp.where(below.astype(jnp.float32) < x, jnp.nextafter(below, jnp.inf), below)
    return below.astype(jnp.float32), above.astype(jnp.float32)


def test_stochastic_rounding_takes_a_neighbour_with_the_probability_of_its_distance():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(64) * 10.0 ** rng.integers(-20, 20, 64), jnp.float32)
    draws = jax.vmap(lambda k: rounding.stochastic_round(x, k))(jax.random.split(jax.random.key(1), 4000))
    draws = np.asarray(draws, np.float32)
    below, above = (np.asarray(v) for v in _neighbours(x))
    assert np.all((draws == below) | (draws == above))
    gap = np.where(above > below, above - below, 1.0)
    p_up = np.where(above > below, (np.asarray(x) - below) / gap, 0.0)
    seen = (draws == above).mean(axis=0)
    assert np.all(np.abs(seen - p_up) <= 4 * np.sqrt(p_up * (1 - p_up) / 4000) + 1e-9)
    exact = jnp.asarray([0.0, 1.0, -2.5, jnp.inf, -jnp.inf], jnp.float32)
    np.testing.assert_array_equal(
        rounding.stochastic_round(exact, jax.random.key(0)).astype(jnp.float32), exact
    )
    assert jnp.isnan(rounding.stochastic_round(jnp.asarray([jnp.nan]), jax.random.key(0))[0])


def test_a_corrected_slot_holds_about_fifteen_bits():
    """The int8 correction keeps the rest to 1/127 of half a bfloat16 step (plus one unit, its rounding)."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(100_000) * 10.0 ** rng.integers(-30, 30, 100_000), jnp.float32)
    slot = rounding.CorrectedBF16(0).store(x)
    assert slot.values.dtype == jnp.bfloat16 and slot.correction.dtype == jnp.int8
    error = np.abs(np.asarray(slot.dequantize()) - np.asarray(x)) / np.abs(np.asarray(x))
    assert error.max() <= 2.0**-7 * 2 / 127  # half a step is at most 2**-8 of the value; two units of 1/127
    assert np.median(error) < 2.0**-15


def _second_moment_of_a_constant_gradient(format, steps=1000):
    """Adam's second moment after `steps` gradients of 1: float32 has 1 - 0.999**steps (0.632)."""
    tx = gradtx.scale_by_bias_corrected_adam(b2=0.999)
    if format == "bf16":
        tx = gradtx.scale_by_bias_corrected_adam(b2=0.999, nu_dtype=jnp.bfloat16)
    elif format is not None:
        tx = gradtx.low_bit_state(tx, format)
    params = {"w": jnp.zeros(4096)}
    grads = {"w": jnp.ones(4096)}

    def body(state, _):
        return tx.update(grads, state)[1], None

    state, _ = jax.lax.scan(body, tx.init(params), None, length=steps)
    return np.asarray(gradtx.get_slot(state, "nu")["w"], np.float32)


def test_a_slowly_moving_moment_moves_with_either_format_and_stalls_rounded_to_nearest():
    exact = 1 - 0.999**1000
    nearest = _second_moment_of_a_constant_gradient("bf16")
    assert np.all(nearest <= 0.5)  # each step adds 1e-3 * (1 - nu): under half a step, it stops
    stochastic = _second_moment_of_a_constant_gradient("bf16+sr")
    # right on average; each element wanders: a step's rounding (variance <= gap**2 / 4, gap = 2**-8 here)
    # summed with weights 0.999**k has a standard deviation of at most about 2**-9 / sqrt(2e-3) = 0.044
    assert abs(stochastic.mean() - exact) < 2e-3 and stochastic.std() < 0.044
    corrected = _second_moment_of_a_constant_gradient("bf16+8")
    # the same wander with 1/127 of half a step as the unit: 127 times less (2**-16 / sqrt(2e-3) = 3.4e-4)
    assert abs(corrected.mean() - exact) < 2e-5 and corrected.std() < 3.4e-4


@pytest.mark.parametrize("format", ["bf16+sr", "bf16+8"])
def test_bf16_slots_keep_their_form_and_key_through_jitted_steps_and_npz(format, tmp_path):
    params = {"w": jnp.ones((8, 16)), "n": jnp.zeros(3, jnp.int32)}
    tx = gradtx.low_bit_state(gradtx.lion(1e-3), format, seed=3)
    state = tx.init(params)
    assert jax.tree.structure(state) == jax.tree.structure(tx.init(params))
    grads = {"w": jnp.full((8, 16), 0.5), "n": None}
    step = jax.jit(tx.update)
    u0, s1 = step(grads, state, params)
    u1, s2 = step(grads, s1, params)
    assert jax.tree.structure(s2) == jax.tree.structure(state)
    keys = [jax.tree.leaves(s)[-1] for s in (state, s1, s2)]
    assert not np.array_equal(keys[0], keys[1]) and not np.array_equal(keys[1], keys[2])
    np.testing.assert_allclose(gradtx.get_slot(s2, "mu")["w"], 0.5 * (1 - 0.99**2), rtol=2e-2)
    checkpoint.save_npz(tmp_path / "s.npz", s2)
    helpers.assert_trees_close(checkpoint.load_npz(tmp_path / "s.npz", tx.init(params)), s2, rtol=0, atol=0)
    again = jax.jit(tx.update)(grads, s1, params)
    helpers.assert_trees_close(again, (u1, s2), rtol=0, atol=0)  # a step is a function of the state


def test_each_slot_draws_its_own_stream():
    tx = gradtx.low_bit_state(gradtx.adam(1e-3), "bf16+sr")
    state = tx.init({"a": jnp.zeros(4), "b": jnp.zeros(4)})
    keys = [k for k in jax.tree.leaves(state) if k.dtype == jnp.uint32]
    assert len(keys) == 4 and len({tuple(np.asarray(k)) for k in keys}) == 4


def test_bf16_params_take_updates_under_half_a_step_on_average_with_a_key():
    params = {"w": jnp.ones(50_000, jnp.bfloat16), "f": jnp.ones(3)}
    updates = {"w": jnp.full(50_000, 1e-3), "f": jnp.full(3, 1e-3)}
    assert np.all(np.asarray(gradtx.apply_updates(params, updates)["w"], np.float32) == 1.0)  # lost
    new = jax.jit(gradtx.apply_updates)(params, updates, key=jax.random.key(0))
    assert new["w"].dtype == jnp.bfloat16 and new["f"].dtype == jnp.float32
    assert abs(np.asarray(new["w"], np.float32).mean() - 1.001) < 1e-4
    np.testing.assert_array_equal(new["f"], gradtx.apply_updates(params, updates)["f"])  # float32: as without
    sparse = {"w": gradtx.sparse.RowSparse(jnp.asarray([0]), jnp.ones((1,)), (1,)), "f": updates["f"]}
    with pytest.raises(TypeError, match="`apply_updates`: `key` rounds dense updates of bfloat16 params"):
        gradtx.apply_updates(
            {"w": jnp.ones(1, jnp.bfloat16), "f": params["f"]}, sparse, key=jax.random.key(0)
        )
