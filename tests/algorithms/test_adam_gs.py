"""gradtx/_algorithms/adam_gs.py: scale_by_adam_gs and scale_by_lazy_adam_gs, tf.contrib.opt's AdamGS and
LazyAdamGS (Adam's bias corrections from the `global_step` argument), and their aliases against float64
references of contrib's rules.

Their building blocks with TF's scalar dtypes are checked with the rest of the Adam family in test_adam.py.
Here: the missing `global_step` and its extremes, and the aliases' numbers against
tests/reference_contrib.py in float32 and float64, dense and row-sparse.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers
from tests import reference_contrib as ref

VARIANTS = {
    "scale_by_adam_gs": gradtx.scale_by_adam_gs,
    "scale_by_lazy_adam_gs": gradtx.scale_by_lazy_adam_gs,
}


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


# --------------------------------------------------------------------------- the aliases against contrib's

CASES = {
    "adam_gs": (
        lambda: gradtx.adam_gs(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.adam_gs(0.05, 0.8, 0.95, 1e-3),
        ["m", "v"],
        lambda t: {"global_step": t},
    ),
    "lazy_adam_gs": (
        lambda: gradtx.lazy_adam_gs(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.adam_gs(0.05, 0.8, 0.95, 1e-3, lazy=True),
        ["m", "v"],
        lambda t: {"global_step": t},
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


@SPARSE
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_the_reference(name, sparse, x64):
    make_tx, make_ref, slots, extra = CASES[name]
    helpers.compare_to_reference(
        make_tx, make_ref, sparse=sparse, x64=x64, slots=slots, extra_args=extra, atol32=5e-6
    )
