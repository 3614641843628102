"""gradtx/_algorithms/adafactor.py: the alias `adafactor` against optax's, 20 steps on the same
gradients, its config names and its errors (its building blocks: test_adafactor_blocks.py).

Both are given the hyperparameters as users write them, Python floats: gradtx combines them in double
precision as optax does (`gradtx.update_rule`'s dtype policy), so `1 - b2` is optax's number (b2 = 0.999:
computed from float32(b2) it would be off by 1e-5 of the second moment), jitted and eagerly.
"""

from __future__ import annotations

import jax
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


def _relative_step(count):
    """Adafactor's relative step size rho_t = min(1e-2, 1 / sqrt(t))."""
    return jnp.minimum(1e-2, jax.lax.rsqrt(count + 1.0))


CASES = {
    "adafactor": (
        lambda: gradtx.adafactor(0.05, min_dim_size_to_factor=3),
        lambda: optax.adafactor(0.05, min_dim_size_to_factor=3),
        SHAPES,
    ),
    "adafactor-momentum-decay-schedule": (
        lambda: gradtx.adafactor(
            _decaying, 3, 0.6, clipping_threshold=0.5, momentum=0.9, weight_decay=0.01, mask=["w", "conv"]
        ),
        lambda: optax.adafactor(
            _decaying,
            3,
            0.6,
            clipping_threshold=0.5,
            momentum=0.9,
            weight_decay_rate=0.01,
            weight_decay_mask={"w": True, "b": False, "conv": True, "head": False},
        ),
        SHAPES,
    ),
    "adafactor-unfactored-absolute": (
        lambda: gradtx.adafactor(
            0.05, factored=False, multiply_by_parameter_scale=False, clipping_threshold=None
        ),
        lambda: optax.adafactor(
            0.05, factored=False, multiply_by_parameter_scale=False, clipping_threshold=None
        ),
        SHAPES,
    ),
    "adafactor-defaults-relative-step": (  # optax's defaults: factored from 128 rows
        lambda: gradtx.adafactor(_relative_step),
        lambda: optax.adafactor(_relative_step),
        {"big": (128, 136), "b": (5,)},
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
    ({"class": "Adafactor", "min_dim_size_to_factor": 2}, "adafactor", {"min_dim_size_to_factor": 2}),
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
        (gradtx.adafactor, {"eps": 0.0}, ValueError, r"`adafactor`: `eps` must be > 0, got 0.0"),
        (gradtx.adafactor, {"decay_rate": -0.8}, ValueError, r"`adafactor`: `decay_rate` must be >= 0"),
        (
            gradtx.adafactor,
            {"clipping_threshold": 0.0},
            ValueError,
            r"`adafactor`: `clipping_threshold` must be > 0",
        ),
        (gradtx.adafactor, {"momentum": 1.5}, ValueError, r"`adafactor`: `momentum` must be in \[0.0, 1.0\]"),
        (gradtx.adafactor, {"decay_offset": -1}, ValueError, r"`adafactor`: `decay_offset` must be >= 0"),
        (gradtx.adafactor, {"learning_rate": float("inf")}, ValueError, r"`learning_rate` must be finite"),
        (
            gradtx.adafactor,
            {"min_dim_size_to_factor": 2.5},
            TypeError,
            r"`min_dim_size_to_factor` must be an integer",
        ),
        (gradtx.adafactor, {"factored": 1}, TypeError, r"`adafactor`: `factored` must be True or False"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**kwargs)
