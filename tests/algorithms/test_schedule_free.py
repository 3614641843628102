"""gradtx/_algorithms/schedule_free.py and schedule_free_adamw.py: schedule-free AdamW / SGD against a float64
NumPy reference written from Defazio et al., *The road less scheduled* (2024), Algorithm 1, with the warmup of
the authors' code (step t gets t / warmup_steps); the wrapper `schedule_free` and the aliases against
optax.contrib's.

The reference keeps the paper's sequences `z` and `x` and computes `y` from them; gradtx
keeps `z` and the params `y` and recovers `x`. (optax's warmup shifts the base step by one,
see `scale_by_schedule_free`; with a constant rate optax agrees: the last sections.) Against optax.contrib:
20 jitted steps on the same gradients (every case one compiled program, tests/helpers.py's harness) and 5
eager ones, the params to evaluate at, optax_compat's state as optax's; the aliases' config names and errors.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib
import pytest

import gradtx
from gradtx import optax_compat as ox
from gradtx import packing
from gradtx.optax_compat import contrib
from tests import catalog, helpers, reference
from tests.helpers import call_optax as _optax
from tests.helpers import compare_contrib_run as _compare
from tests.helpers import unstack_steps as _unstack


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


# --------------------------------------------------------------------------- optax.contrib's schedule_free

REAL = {"w": (4, 3), "b": (5,)}


def _real_problem(seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()}
    return params, [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()} for _ in range(steps)
    ]


def _decaying(count):
    return 0.1 * 0.9**count


OPTAX_CONTRIB_CASES = {
    "schedule_free": (
        _real_problem,
        lambda: gradtx.schedule_free(ox.sgd(0.1), 0.1),
        lambda: optax.contrib.schedule_free(optax.sgd(0.1), 0.1),
    ),
    "schedule_free-compat-adam-schedule-bf16-z": (
        _real_problem,
        lambda: contrib.schedule_free(ox.adam(_decaying, b1=0.0), _decaying, 0.8, 1.0, jnp.bfloat16),
        lambda: optax.contrib.schedule_free(optax.adam(_decaying, b1=0.0), _decaying, 0.8, 1.0, jnp.bfloat16),
    ),
    "schedule_free_sgd-compat": (_real_problem, contrib.schedule_free_sgd, optax.contrib.schedule_free_sgd),
    "schedule_free_sgd-compat-warmup-decay": (
        _real_problem,
        lambda: contrib.schedule_free_sgd(0.5, 5, 0.8, 0.01, 1.5),
        lambda: optax.contrib.schedule_free_sgd(0.5, 5, 0.8, 0.01, 1.5),
    ),
    "schedule_free_adamw-compat": (
        _real_problem,
        contrib.schedule_free_adamw,
        optax.contrib.schedule_free_adamw,
    ),
    "schedule_free_adamw-compat-warmup": (
        _real_problem,
        lambda: contrib.schedule_free_adamw(0.05, 4, 0.8, 0.99, 1e-6, 0.01, 1.5),
        lambda: optax.contrib.schedule_free_adamw(0.05, 4, 0.8, 0.99, 1e-6, 0.01, 1.5),
    ),
}


@functools.cache
def _jitted_runs():
    """Every case's 20 steps, gradtx's and optax's, in one compiled program (one compilation for all)."""
    return helpers.contrib_jitted_runs(OPTAX_CONTRIB_CASES)


@pytest.mark.parametrize("name", OPTAX_CONTRIB_CASES)
def test_twenty_steps_equal_optax_jitted(name):
    (ours, state), (theirs, their_state) = _jitted_runs()[name]
    _compare(name, _unstack(ours), state, _unstack(theirs), their_state)


EAGER = [
    "schedule_free-compat-adam-schedule-bf16-z",
    "schedule_free_adamw-compat-warmup",
]


@pytest.mark.parametrize("name", EAGER)
def test_five_steps_equal_optax_eagerly(name):
    """Op by op (one case per family; jit and eager agree for every entry: test_contract's own test)."""
    problem, ours, theirs = OPTAX_CONTRIB_CASES[name]
    params, grads = problem(steps=5)
    actual, state = helpers.run(ours(), params, grads)
    expected, expected_state = helpers.run(_optax(theirs), params, grads)
    _compare(name, actual, state, expected, expected_state)


# --------------------------------------------------------------------------- the aliases against optax

SHAPES = {"w": (6, 4), "b": (5,), "conv": (2, 3, 4), "head": (3, 7)}


def _problem(shapes=SHAPES, seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()} for _ in range(steps)
    ]
    return params, grads


OPTAX_CASES = {
    "schedule_free_adamw": (
        lambda: gradtx.schedule_free_adamw(0.05, weight_decay=0.01),
        lambda: optax.contrib.schedule_free_adamw(0.05, b1=0.9, b2=0.999, weight_decay=0.01),
        SHAPES,
    ),
    "schedule_free_sgd": (
        lambda: gradtx.schedule_free_sgd(0.1, b1=0.8, weight_decay=0.01),
        lambda: optax.contrib.schedule_free_sgd(0.1, b1=0.8, weight_decay=0.01),
        SHAPES,
    ),
}


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("name", OPTAX_CASES)
def test_twenty_steps_equal_optax(name, jit):
    ours, theirs, shapes = OPTAX_CASES[name]
    params, grads = _problem(shapes)
    if not jit:  # eager: 5 steps (jit and eager agree for every optimizer: test_contract's own test)
        grads = grads[:5]
    actual, _ = helpers.run(ours(), params, grads, jit=jit)
    expected, _ = helpers.run(theirs(), params, grads, jit=jit)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, **helpers.tolerance(name), msg=f"{name}: step {t + 1}")


CONFIGS = [
    (
        {"class": "AdamWScheduleFree", "warmup_steps": 3, "beta2": 0.99},
        "schedule_free_adamw",
        {"b2": 0.99},
    ),
    ({"class": "SGDScheduleFree", "learning_rate": 0.1, "b1": 0.5}, "schedule_free_sgd", {"b1": 0.5}),
]


@pytest.mark.parametrize("config, name, kwargs", CONFIGS, ids=[c[0]["class"] for c in CONFIGS])
def test_from_config_and_get_take_the_names_and_tf_arguments(config, name, kwargs):
    """The class names and TF's argument names reach the factory (`get`'s numbers: tests/test_contract.py)."""
    arguments = {k: v for k, v in config.items() if k != "class"}
    assert catalog.entry(config["class"]).name == name
    assert kwargs.items() <= gradtx.registry.translate_kwargs(config["class"], arguments).items()
    params = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}
    expected = getattr(gradtx, name)(**gradtx.registry.translate_kwargs(name, arguments)).init(params)
    for built in (gradtx.from_config(config), gradtx.get(config["class"], **arguments)):
        assert helpers.shape_dtypes(built.init(params)) == helpers.shape_dtypes(expected)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (
            gradtx.schedule_free_adamw,
            {"b1": 0.0},
            ValueError,
            r"`schedule_free_adamw`: `b1` must be in \(0.0, 1.0\]",
        ),
        (gradtx.schedule_free_adamw, {"b2": 1.0}, ValueError, r"`schedule_free_adamw`: `b2` must be in"),
        (
            gradtx.schedule_free_sgd,
            {"warmup_steps": -1},
            ValueError,
            r"`schedule_free_sgd`: `warmup_steps` must be >= 0",
        ),
        (
            gradtx.schedule_free_sgd,
            {"learning_rate": float("nan")},
            ValueError,
            r"`learning_rate` must be finite",
        ),
        (gradtx.schedule_free_sgd, {"weight_lr_power": -2.0}, ValueError, r"`weight_lr_power` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**kwargs)
