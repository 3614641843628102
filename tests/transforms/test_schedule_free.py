"""Schedule-free AdamW / SGD (gradtx/transforms/_schedule_free.py) against a float64 NumPy reference written
from Defazio et al., *The road less scheduled* (2024), Algorithm 1, with the warmup of the authors' code
(step t gets t / warmup_steps).

The reference keeps the paper's sequences `z` and `x` and computes `y` from them; gradtx
keeps `z` and the params `y` and recovers `x`. (optax's warmup shifts the base step by one,
see `scale_by_schedule_free`; with a constant rate optax agrees, tests/optimizers/test_modern_per_tensor.py.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import packing
from tests import helpers, reference


def _rate(lr, k):
    return float(lr(k)) if callable(lr) else lr


def schedule_free_ref(lr, b1=0.9, weight_lr_power=2.0, warmup=0, *, b2=None, eps=1e-8, weight_decay=0.0):
    """The paper's Algorithm 1 for one array (SGD; AdamW's normalisation when `b2` is given)."""

    def init(var):
        zeros = np.zeros_like(var)
        return {"z": var.copy(), "x": var.copy(), "nu": zeros, "weight_sum": 0.0, "lr_max": 0.0}

    def step(y, g, s, t):
        k = t - 1  # gradtx's count: a schedule sees the completed steps
        gamma = _rate(lr, k) * (min(1.0, t / warmup) if warmup else 1.0)
        beta = _rate(b1, k)
        v = s["nu"]
        if b2 is None:
            d = g + weight_decay * y
        else:
            v = b2 * v + (1 - b2) * g * g
            d = g / (np.sqrt(v / (1 - b2**t)) + eps) + weight_decay * y
        lr_max = max(s["lr_max"], gamma)
        weight = lr_max**weight_lr_power
        weight_sum = s["weight_sum"] + weight
        c = weight / weight_sum if weight_sum > 0 else 0.0
        z = s["z"] - gamma * d
        x = (1 - c) * s["x"] + c * z
        y = (1 - beta) * z + beta * x
        return y, {"z": z, "x": x, "nu": v, "weight_sum": weight_sum, "lr_max": lr_max}

    return reference.Reference(init, step)


def _decaying_b1(count):
    return 0.9 - 0.02 * count


CASES = {
    "sgd-warmup": (
        lambda: gradtx.schedule_free_sgd(0.2, warmup_steps=5, weight_decay=0.01),
        lambda: schedule_free_ref(0.2, warmup=5, weight_decay=0.01),
        ["z"],
    ),
    "adamw-warmup-schedule": (
        lambda: gradtx.schedule_free_adamw(
            lambda count: 0.05 / (1.0 + 0.1 * count), 4, 0.8, 0.99, 1e-3, 0.01, weight_lr_power=1.0
        ),
        lambda: schedule_free_ref(
            lambda k: 0.05 / (1.0 + 0.1 * k), 0.8, 1.0, 4, b2=0.99, eps=1e-3, weight_decay=0.01
        ),
        ["z", "nu"],
    ),
    "sgd-b1-schedule": (
        lambda: gradtx.schedule_free_sgd(0.1, b1=_decaying_b1),
        lambda: schedule_free_ref(0.1, b1=_decaying_b1),
        ["z"],
    ),
}


@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_match_the_papers_algorithm(name, x64):
    make_tx, make_ref, slots = CASES[name]
    helpers.compare_to_reference(make_tx, make_ref, sparse=False, x64=x64, slots=slots)


def test_eval_params_are_the_average_x_of_the_paper():
    make_tx, make_ref, _ = CASES["adamw-warmup-schedule"]
    params, grads = helpers.problem(4)
    _, ref_slots = reference.run(make_ref(), params, grads)
    trajectory, state = helpers.run(make_tx(), params, grads)
    x = gradtx.schedule_free_eval_params(state, trajectory[-1])
    helpers.assert_trees_close(x, [s["x"] for s in ref_slots], rtol=1e-5, atol=1e-6)


def test_eval_params_on_packed_params_and_through_inject_hyperparams():
    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    grads = [jax.tree.map(lambda p, i=i: jnp.sin(p + i), params) for i in range(3)]
    tx = gradtx.schedule_free_adamw(0.1)
    expected, state = helpers.run(tx, params, grads)
    x = gradtx.schedule_free_eval_params(state, expected[-1])
    packed = packing.pack(params)
    actual, packed_state = helpers.run(tx, packed, [packing.pack(g, layout=packed.layout) for g in grads])
    packed_x = gradtx.schedule_free_eval_params(packed_state, actual[-1])
    assert packing.is_packed(packed_x)
    helpers.assert_trees_close(packing.unpack(packed_x), x, rtol=1e-6, atol=1e-7)
    injected = gradtx.inject_hyperparams(gradtx.schedule_free_adamw)(learning_rate=0.1)
    through, injected_state = helpers.run(injected, params, grads)
    helpers.assert_trees_close(gradtx.schedule_free_eval_params(injected_state, through[-1]), x, rtol=1e-6)


def test_eval_params_need_a_schedule_free_state():
    state = gradtx.adam(0.1).init({"w": jnp.ones(2)})
    with pytest.raises(
        ValueError, match=r"`schedule_free_eval_params`: `state` holds no schedule-free state"
    ):
        gradtx.schedule_free_eval_params(state, {"w": jnp.ones(2)})
