"""gradtx/transforms/_adam.py, _adam_gs.py and _adamax.py: a building block per variant, TF's scalar
dtypes, slots kept.

The numbers of each variant against TF and float64 references are in tests/parity/test_adam.py,
tests/optimizers/test_tf_train.py and tests/optimizers/test_contrib.py (through the aliases).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers

VARIANTS = {
    "scale_by_adam": gradtx.scale_by_adam,
    "scale_by_nesterov_adam": gradtx.scale_by_nesterov_adam,
    "scale_by_lazy_adam": gradtx.scale_by_lazy_adam,
    "scale_by_adam_gs": gradtx.scale_by_adam_gs,
    "scale_by_lazy_adam_gs": gradtx.scale_by_lazy_adam_gs,
    "scale_by_adamax": gradtx.scale_by_adamax,
}
EXTRA = [{"global_step": t} for t in range(19)]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_x64_does_not_change_the_numbers_of_float32_params(name):
    """TF keeps beta powers in the variables' dtype: float32 params, float32 scalars, x64 or not."""
    tx = gradtx.chain(VARIANTS[name](0.9, 0.999, 1e-3), gradtx.scale_by_learning_rate(0.05))
    params, grads = helpers.problem(2, steps=19)
    plain, plain_state = helpers.run(tx, params, grads, extra_args_seq=EXTRA)
    with jax.enable_x64(True):
        wide, wide_state = helpers.run(tx, params, grads, extra_args_seq=EXTRA)
        assert wide_state[0].beta1_power.dtype == jnp.float32
    helpers.assert_trees_close(wide, plain, rtol=0, atol=0)
    helpers.assert_trees_close(wide_state, plain_state, rtol=0, atol=0)


def test_float64_params_get_float64_beta_powers():
    with jax.enable_x64(True):
        state = gradtx.scale_by_adam().init(jnp.zeros(2, jnp.float64))
        assert state.beta1_power.dtype == state.beta2_power.dtype == jnp.float64


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_bfloat16_params_with_float32_gradients_keep_their_slot_dtypes(name, sparse):
    tx = VARIANTS[name](mu_dtype=jnp.bfloat16) if name != "scale_by_adamax" else VARIANTS[name]()
    params = jnp.zeros((4, 2), jnp.bfloat16)
    grad = jnp.full((4, 2), 0.3, jnp.float32)
    if sparse:
        grad = RowSparse(jnp.array([1, 3]), grad[:2], (4, 2))
    state = tx.init(params)
    _, new_state = tx.update(grad, state, params, global_step=0)
    assert helpers.shape_dtypes(new_state) == helpers.shape_dtypes(state)


def test_the_variants_differ_only_where_their_rules_do():
    """Dense gradients: lazy == TF1 Adam, AdamGS (global_step = t - 1) == TF1 Adam; Nesterov differs."""
    params, grads = helpers.problem(3, steps=5)

    def run(block):
        return helpers.run(
            gradtx.chain(block(0.8, 0.95, 1e-3), gradtx.scale_by_learning_rate(0.1)),
            params,
            grads,
            extra_args_seq=EXTRA,
        )[0]

    adam = run(gradtx.scale_by_adam)
    helpers.assert_trees_close(run(gradtx.scale_by_lazy_adam), adam, rtol=0, atol=0)
    helpers.assert_trees_close(run(gradtx.scale_by_adam_gs), adam, rtol=2e-6, atol=1e-6)
    nesterov = run(gradtx.scale_by_nesterov_adam)
    assert not np.allclose(nesterov[-1][0], adam[-1][0])


@pytest.mark.parametrize("name", ["scale_by_adam_gs", "scale_by_lazy_adam_gs"])
def test_global_step_variants_name_the_missing_argument(name):
    tx = VARIANTS[name]()
    with pytest.raises(gradtx.MissingExtraArgError, match=rf"`{name}`: `update` needs the extra argument"):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))


@pytest.mark.parametrize("name", ["scale_by_adam_gs", "scale_by_lazy_adam_gs"])
def test_global_step_at_the_int32_limit_and_below_zero(name):
    """int32's largest step gives the corrected step of a long run (no wrap to -2**31); a known
    negative step is refused and a traced one counts as 0."""
    tx = VARIANTS[name]()
    g, state = jnp.array([2.0, -1.0]), tx.init(jnp.zeros(2))
    u, _ = tx.update(g, state, global_step=jnp.int32(2**31 - 1))
    # beta**(2**31) is 0 in float32: the bias corrections are 1, the step (1-b1) g / (sqrt((1-b2) g^2) + eps)
    expected = 0.1 * g / (np.sqrt(0.001) * np.abs(g) + 1e-8)
    np.testing.assert_allclose(u, expected, rtol=1e-5)
    with pytest.raises(ValueError, match=rf"`{name}`: `global_step` must be a scalar >= 0, got -3"):
        tx.update(g, state, global_step=-3)
    traced = jax.jit(lambda s, k: tx.update(g, s, global_step=k)[0])(state, jnp.int32(-3))
    np.testing.assert_array_equal(traced, tx.update(g, state, global_step=0)[0])
