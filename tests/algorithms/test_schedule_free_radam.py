"""gradtx/_algorithms/schedule_free_radam.py: schedule-free RAdam against pytorch-optimizer's
`ScheduleFreeRAdam`, 20 steps on the recorded gradients (its params are the training iterate y, as
gradtx's are), its arguments and defaults, its evaluation params, its errors."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references

CASES = _references.cases("schedule_free_radam")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_schedule_free_radam_equals_pytorch_optimizer(case):
    _references.check_case(case)


@pytest.mark.parametrize(
    "label, off", [("weighting", {"r": 0.0}), ("loud", {"silent_sgd_phase": True})], ids=["r", "silent"]
)
def test_the_cases_exercise_their_mode(label, off):
    case = next(c for c in CASES if c.label == label)
    with pytest.raises(AssertionError):
        _references.check_case(case, gradtx.get(case.class_name, **{**case.kwargs, **off}))


def test_schedule_free_radam_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("schedule_free_radam", "schedule_free_radam")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("ScheduleFreeRAdam", maximize=True)


def test_the_silent_phase_takes_no_step_until_rho_passes_4():
    tx = gradtx.schedule_free_radam(0.1, b2=0.999)  # rho_t > 4 from step 5 (rho_5 = 4.99)
    params = jnp.array([1.0, -2.0])
    state = tx.init(params)
    for t in range(1, 7):
        u, state = tx.update(params, state, params)
        assert bool(jnp.all(u == 0)) == (t < 5), t
        params = gradtx.apply_updates(params, u)


def test_eval_params_are_the_average():
    """x = (y - (1 - b1) z) / b1, as the reference's `eval()` moves its params."""
    case = CASES[1]
    tx = gradtx.get(case.class_name, **case.kwargs)
    params = {k: jnp.asarray(v) for k, v in case.init.items()}
    state = tx.init(params)
    for g in case.grads:
        u, state = tx.update({k: jnp.asarray(v) for k, v in g.items()}, state, params)
        params = gradtx.apply_updates(params, u)
    x = gradtx.schedule_free_eval_params(state, params)
    z = gradtx.get_slot(state, "z")
    b1 = case.kwargs["betas"][0]
    for k in params:
        np.testing.assert_allclose(x[k], (params[k] - (1 - b1) * z[k]) / b1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"b1": 1.0}, "b1"),
        ({"b2": lambda c: 0.9}, "b2"),
        ({"r": -1.0}, "r"),
        ({"silent_sgd_phase": 1}, "silent"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=f"`{name}"):
        gradtx.schedule_free_radam(0.1, **kwargs)
