"""gradtx/_algorithms/lamb.py: LAMB against optax's, 20 steps on the same gradients, its config names
and its errors.

Both are given the hyperparameters as users write them, Python floats: gradtx combines them in double
precision as optax does (`gradtx.update_rule`'s dtype policy), so `1 - b2` is optax's number (b2 = 0.999:
computed from float32(b2) it would be off by 1e-5 of the second moment), jitted and eagerly.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import catalog, helpers

SHAPES = {"w": (6, 4), "b": (5,), "conv": (2, 3, 4), "head": (3, 7)}


def _problem(shapes=SHAPES, seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()} for _ in range(steps)
    ]
    return params, grads


def _decaying(count):
    return 0.1 * 0.9**count


CASES = {
    "lamb": (
        lambda: gradtx.lamb(0.05, weight_decay=0.01),
        lambda: optax.lamb(0.05, b1=0.9, b2=0.999, weight_decay=0.01),
        SHAPES,
    ),
    "lamb-masked-schedule": (
        lambda: gradtx.lamb(
            _decaying,
            0.8,
            0.99,
            1e-4,
            weight_decay=0.1,
            mask={"w": True, "b": False, "conv": True, "head": False},
        ),
        lambda: optax.lamb(
            _decaying,
            0.8,
            0.99,
            1e-4,
            weight_decay=0.1,
            mask={"w": True, "b": False, "conv": True, "head": False},
        ),
        SHAPES,
    ),
}


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax(name, jit):
    ours, theirs, shapes = CASES[name]
    params, grads = _problem(shapes)
    if not jit:  # eager: 5 steps (jit and eager agree for every optimizer: test_contract's own test)
        grads = grads[:5]
    actual, _ = helpers.run(ours(), params, grads, jit=jit)
    expected, _ = helpers.run(theirs(), params, grads, jit=jit)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, **helpers.tolerance(name), msg=f"{name}: step {t + 1}")


CONFIGS = [
    (
        {"class": "LAMB", "learning_rate": 0.1, "beta1": 0.8, "epsilon": 1e-4},
        "lamb",
        {"b1": 0.8, "eps": 1e-4},
    ),
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
        (gradtx.lamb, {"learning_rate": 0.1, "b2": 1.0}, ValueError, r"`lamb`: `b2` must be in \[0.0, 1.0\)"),
        (
            gradtx.lamb,
            {"learning_rate": 0.1, "min_norm": -1.0},
            ValueError,
            r"`lamb`: `min_norm` must be >= 0",
        ),
        (gradtx.lamb, {"learning_rate": -0.1}, ValueError, r"`lamb`: `learning_rate` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**kwargs)
