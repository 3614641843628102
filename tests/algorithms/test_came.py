"""gradtx/_algorithms/came.py: CAME against pytorch-optimizer's `CAME` (tools/references/came.py), its
arguments, its factored statistics and errors."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._algorithms.came import factored_rsqrt
from tests.algorithms import _references


@pytest.mark.parametrize("case", _references.cases("came"), ids=repr)
def test_came_equals_pytorch_optimizer(case):
    _references.check_case(case)


def test_came_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("came", "came")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("CAME", maximize=True)


def test_the_statistics_are_factored_over_the_last_two_axes():
    tx = gradtx.scale_by_came()
    state = tx.init({"conv": jnp.zeros((4, 3, 2, 5)), "bias": jnp.zeros(5)})
    assert state.exp_avg_sq_row["conv"].shape == (4, 3, 2)
    assert state.exp_avg_sq_col["conv"].shape == (4, 3, 5)
    assert state.exp_avg_sq["conv"].shape == (1,)  # a placeholder
    assert state.exp_avg_sq["bias"].shape == (5,)
    assert state.exp_avg_res_row["bias"].shape == (1,)


def test_factored_rsqrt_is_the_rank_one_inverse_root():
    rng = np.random.default_rng(0)
    v = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    row, col = v.mean(axis=-1), v.mean(axis=-2)
    want = 1 / np.sqrt(np.outer(row, col) / row.mean())
    np.testing.assert_allclose(factored_rsqrt(jnp.asarray(row), jnp.asarray(col)), want, rtol=1e-6)


def test_a_vector_steps_by_its_momentum_alone():
    tx = gradtx.scale_by_came(b1=0.5)
    g = jnp.array([3.0, -4.0])
    u, state = tx.update(g, tx.init(g))
    np.testing.assert_array_equal(u, state.exp_avg)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"b3": 1.0}, r"`came`: `b3` must be in \[0.0, 1.0\)"),
        ({"clip_threshold": 0.0}, r"`came`: `clip_threshold` must be > 0"),
        ({"eps1": -1.0}, r"`came`: `eps1` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gradtx.came(0.1, **kwargs)
