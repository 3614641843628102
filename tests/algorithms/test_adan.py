"""gradtx/_algorithms/adan.py: Adan against optax's, 20 steps on the same gradients, its config names
and its errors.

Both are given the hyperparameters as users write them, Python floats: gradtx combines them in double
precision as optax does (`gradtx.update_rule`'s dtype policy), jitted and eagerly.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import catalog, helpers

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
MASK = {"w": True, "b": False, "s": False}


def _problem(seed=0, steps=helpers.STEPS, scale=1.0):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = [
        {k: jnp.asarray(scale * rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
        for _ in range(steps)
    ]
    return params, grads


def _decaying(count):
    return 0.1 * 0.9**count


CASES = {
    "adan": (
        lambda: gradtx.adan(0.05, weight_decay=0.01),
        lambda: optax.adan(0.05, 0.98, 0.92, 0.99, weight_decay=0.01),
    ),
    "adan-mask-schedule": (
        lambda: gradtx.adan(_decaying, 0.9, 0.8, 0.95, 1e-6, 0.0, 0.05, mask=MASK),
        lambda: optax.adan(_decaying, 0.9, 0.8, 0.95, 1e-6, 0.0, 0.05, mask=MASK),
    ),
}


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax(name, jit):
    ours, theirs = CASES[name]
    params, grads = _problem()
    if not jit:  # eager: 5 steps (jit and eager agree for every optimizer: test_contract's own test)
        grads = grads[:5]
    actual, _ = helpers.run(ours(), params, grads, jit=jit)
    expected, _ = helpers.run(theirs(), params, grads, jit=jit)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")


CONFIGS = [
    ({"class": "Adan", "learning_rate": 0.1, "b3": 0.9, "weight_decay": 0.01}, "adan", {"b3": 0.9}),
]


@pytest.mark.parametrize("config, name, kwargs", CONFIGS, ids=[c[0]["class"] for c in CONFIGS])
def test_from_config_and_get_take_the_names_and_tf_arguments(config, name, kwargs):
    """The class names and TF's argument names reach the factory (`get`'s numbers: tests/test_contract.py)."""
    arguments = {k: v for k, v in config.items() if k != "class"}
    assert catalog.entry(config["class"]).name == name
    assert kwargs.items() <= gradtx.registry.translate_kwargs(config["class"], arguments).items()
    params, grads = {"w": jnp.ones((3, 2))}, {"w": jnp.full((3, 2), 0.5)}
    expected = getattr(gradtx, name)(**gradtx.registry.translate_kwargs(name, arguments))
    want = expected.update(grads, expected.init(params), params)[0]
    for built in (gradtx.from_config(config), gradtx.get(config["class"], **arguments)):
        helpers.assert_trees_close(built.update(grads, built.init(params), params)[0], want, rtol=0, atol=0)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (gradtx.adan, {"b3": 1.0}, ValueError, r"`adan`: `b3` must be in \[0.0, 1.0\)"),
        (gradtx.adan, {"learning_rate": -0.1}, ValueError, r"`adan`: `learning_rate` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    if factory is not gradtx.rprop or "learning_rate" not in kwargs:
        kwargs = {"learning_rate": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        factory(**kwargs)
