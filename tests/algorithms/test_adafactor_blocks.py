"""gradtx/_algorithms/adafactor.py: Adafactor's building block scale_by_factored_rms against optax's, its
factored statistics, and where the per-row / per-axis statistics of the per-tensor rules (Adafactor, SM3,
NovoGrad) are placed on a mesh (the alias `adafactor`: test_adafactor.py; the other blocks of optax's
Adafactor, `clip_by_block_rms`, `scale_by_param_block_rms` and `ema`: tests/combinators/)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from tests import helpers

SHAPES = {"w": (6, 4), "conv": (3, 2, 5), "b": (4,)}


def _problem(seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()} for _ in range(steps)
    ]
    return params, grads


def _capped(step, exponent):
    """A decay schedule of Zhai et al.: Adafactor's, capped at 0.9 (and defined before `step_offset`)."""
    return jnp.minimum(0.9, 1.0 - (jnp.maximum(step, 0) + 1.0) ** (-exponent))


CASES = {
    "factored-rms-offset-capped": (
        lambda: gradtx.chain(
            gradtx.scale_by_factored_rms(True, 0.7, 3, 3, 1e-20, decay_rate_fn=_capped), gradtx.scale(-0.1)
        ),
        lambda: optax.chain(optax.scale_by_factored_rms(True, 0.7, 3, 3, 1e-20, _capped), optax.scale(-0.1)),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax(name):
    ours, theirs = CASES[name]
    params, grads = _problem()
    actual, _ = helpers.run(ours(), params, grads)
    expected, _ = helpers.run(theirs(), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")


def test_factored_statistics_have_one_entry_per_row_and_column():
    """`v_row` has an entry per index of the second largest axis, `v_col` of the largest (of a (3, 2, 5)
    leaf: axes 0 and 2, the others kept); a vector is not factored; unused slots are optax's `zeros((1,))`."""
    params, grads = _problem(steps=1)
    tx = gradtx.scale_by_factored_rms(min_dim_size_to_factor=3)
    state = tx.init(params)
    assert state.v_row["w"].shape == (4,) and state.v_col["w"].shape == (6,) and state.v["w"].shape == (1,)
    assert state.v_row["conv"].shape == (3, 2) and state.v_col["conv"].shape == (2, 5)
    assert state.v["b"].shape == (4,) and state.v_row["b"].shape == (1,) and state.v_col["b"].shape == (1,)
    _, new = tx.update(grads[0], state, params)
    g2 = np.asarray(grads[0]["w"], np.float64) ** 2 + 1e-30
    np.testing.assert_allclose(new.v_row["w"], g2.mean(axis=0), rtol=1e-6)  # beta2 = 1 - 1^-0.8 = 0 at t = 1
    np.testing.assert_allclose(new.v_col["w"], g2.mean(axis=1), rtol=1e-6)


def test_per_axis_statistics_are_placed_like_their_axes_of_a_sharded_param():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))
    w = jax.device_put(jnp.ones((8, 6)), NamedSharding(mesh, P("data", "model")))

    def placed(x, *spec):
        return x.sharding.is_equivalent_to(NamedSharding(mesh, P(*spec)), x.ndim)

    adafactor = gradtx.scale_by_factored_rms(min_dim_size_to_factor=2).init({"w": w})
    assert placed(adafactor.v_row["w"], "model") and placed(adafactor.v_col["w"], "data")  # 6 and 8 entries
    assert placed(adafactor.v["w"])  # the scalar placeholder lives on the param's devices
    sm3 = gradtx.scale_by_sm3().init({"w": w})
    assert placed(sm3.mu["w"][0], "data") and placed(sm3.mu["w"][1], "model")
    assert placed(sm3.nu["w"], "data", "model")
    novograd = gradtx.scale_by_novograd().init({"w": w})
    assert placed(novograd.nu["w"]) and placed(novograd.mu["w"], "data", "model")
