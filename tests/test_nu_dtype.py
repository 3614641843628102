"""`nu_dtype` beside `mu_dtype` (optax issue 1552: bf16 params left Adam's second moment in bf16): every
factory that stores a second moment and takes `mu_dtype` keeps that moment in `nu_dtype` (None: the param's
dtype, as before), and a float32 `nu` of bf16 gradients has the numbers of a float32 recurrence (its squares
taken in float32, not bf16 ones widened)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers

PARAMS = {"w": jnp.ones((4, 3), jnp.bfloat16), "b": jnp.ones(3, jnp.bfloat16)}
SECOND_MOMENTS = ("v", "nu", "nu_max")  # the slots `nu_dtype` sets; `m`/`mu` follow `mu_dtype`

FACTORIES = {
    "scale_by_adam": gradtx.scale_by_adam,
    "scale_by_nesterov_adam": gradtx.scale_by_nesterov_adam,
    "scale_by_lazy_adam": gradtx.scale_by_lazy_adam,
    "scale_by_bias_corrected_adam": gradtx.scale_by_bias_corrected_adam,
    "scale_by_bias_corrected_amsgrad": gradtx.scale_by_bias_corrected_amsgrad,
    "scale_by_novograd": gradtx.scale_by_novograd,
    "adam": lambda **kw: gradtx.adam(0.1, **kw),
    "nadam": lambda **kw: gradtx.nadam(0.1, **kw),
    "lazy_adam": lambda **kw: gradtx.lazy_adam(0.1, **kw),
    "adamw": lambda **kw: gradtx.adamw(0.1, weight_decay=0.01, **kw),
    "nadamw": lambda **kw: gradtx.nadamw(0.1, **kw),
    "novograd": lambda **kw: gradtx.novograd(0.1, **kw),
    "muon": lambda **kw: gradtx.muon(0.1, **kw),
}
WITH_GLOBAL_STEP = {
    "scale_by_adam_gs": gradtx.scale_by_adam_gs,
    "scale_by_lazy_adam_gs": gradtx.scale_by_lazy_adam_gs,
    "adam_gs": lambda **kw: gradtx.adam_gs(0.1, **kw),
    "lazy_adam_gs": lambda **kw: gradtx.lazy_adam_gs(0.1, **kw),
}


def _slot_dtypes(tx, extra):
    """`{slot name: {dtypes}}` of the state after a step, traced (no compilation)."""

    def step(params):
        return tx.update(params, tx.init(params), params, **extra)[1]

    state = jax.eval_shape(step, PARAMS)
    names = {"m", "momentum", *SECOND_MOMENTS}
    return {
        name: {x.dtype for x in jax.tree.leaves(gradtx.get_slot(state, name))}
        for name in names
        if name in gradtx.slot_names(state)
    }


@pytest.mark.parametrize("name", [*FACTORIES, *WITH_GLOBAL_STEP])
def test_nu_dtype_keeps_the_second_moment_of_bf16_params_in_float32(name):
    factory = FACTORIES.get(name) or WITH_GLOBAL_STEP[name]
    extra = {"global_step": 0} if name in WITH_GLOBAL_STEP else {}
    wide = _slot_dtypes(factory(nu_dtype=jnp.float32), extra)
    plain = _slot_dtypes(factory(), extra)
    assert {k for k in wide if k in SECOND_MOMENTS}, f"{name}: no second moment found in {wide}"
    for slot in wide:
        want = jnp.float32 if slot in SECOND_MOMENTS else jnp.bfloat16  # the first moment keeps mu_dtype's
        assert wide[slot] == {jnp.dtype(want)}, f"{name}: {slot} is {wide[slot]}"
        assert plain[slot] == {jnp.dtype(jnp.bfloat16)}, f"{name} without nu_dtype: {slot} is {plain[slot]}"


def test_a_float32_nu_of_bf16_gradients_has_the_numbers_of_a_float32_recurrence():
    """20 jitted steps of optax-form Adam on bf16 params: `v` is the float32 recurrence of the bf16 gradients
    (squared in float32) to 1e-6, where a bf16 `v` is 1e-3 away from it."""
    rng = np.random.default_rng(0)
    grads = jnp.asarray(rng.standard_normal((helpers.STEPS, 5, 3)), jnp.bfloat16)
    params = jnp.asarray(rng.standard_normal((5, 3)), jnp.bfloat16)

    def final_nu(nu_dtype):
        tx = gradtx.scale_by_bias_corrected_adam(b2=0.95, nu_dtype=nu_dtype)

        def step(state, g):
            return tx.update(g, state, params)[1], None

        return jax.lax.scan(step, tx.init(params), grads)[0].nu

    wide, narrow = jax.jit(lambda: (final_nu(jnp.float32), final_nu(None)))()
    g32 = np.asarray(grads, np.float32)
    v = np.zeros((5, 3), np.float32)
    for g in g32:
        v = np.float32(0.95) * v + np.float32(1 - 0.95) * (g * g)
    assert wide.dtype == jnp.float32 and narrow.dtype == jnp.bfloat16
    np.testing.assert_allclose(wide, v, rtol=1e-6, atol=1e-7)
    assert np.max(np.abs(np.asarray(narrow, np.float32) - v) / v) > 1e-3  # what nu_dtype is for


def test_nu_dtype_is_checked():
    with pytest.raises(TypeError, match=r"`adam`: `nu_dtype` must be None or a floating-point"):
        gradtx.adam(0.1, nu_dtype=jnp.int32)
