"""Adafactor, LAMB, NovoGrad, SM3, Muon and schedule-free AdamW / SGD against optax, 20 steps on the same
gradients (gradtx/optimizers/_modern_per_tensor.py, _schedule_free.py).

Both are given the hyperparameters as users write them, Python floats: gradtx combines them
in double precision as optax does (`gradtx.update_rule`'s dtype policy), so `1 - b2` is
optax's number (b2 = 0.999: computed from float32(b2) it would be off by 1e-5 of the second
moment), jitted and eagerly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib
import pytest

import gradtx
from tests import catalog, helpers

SHAPES = {"w": (6, 4), "b": (5,), "conv": (2, 3, 4), "head": (3, 7)}
DION = (  # five per-iteration Newton-Schulz triples (optax's "dion" preset)
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
)


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
    "novograd": (
        lambda: gradtx.novograd(0.05, weight_decay=0.01),
        lambda: optax.novograd(0.05, weight_decay=0.01),
        SHAPES,
    ),
    "novograd-schedule": (
        lambda: gradtx.novograd(_decaying, 0.8, 0.5, 1e-4, 1e-3),
        lambda: optax.novograd(_decaying, 0.8, 0.5, 1e-4, 1e-3),
        SHAPES,
    ),
    "sm3": (lambda: gradtx.sm3(0.1), lambda: optax.sm3(0.1, momentum=0.9), SHAPES),
    "muon": (
        lambda: gradtx.muon(0.05, weight_decay=0.01, adam_weight_decay=0.02),
        lambda: optax.contrib.muon(
            0.05,
            beta=0.95,
            adam_b1=0.9,
            adam_b2=0.999,
            weight_decay=0.01,
            adam_weight_decay=0.02,
        ),
        SHAPES,
    ),
    "muon-plain-adaptive-rms-dion": (
        lambda: gradtx.muon(
            0.05, DION, beta=0.9, nesterov=False, adaptive=True, consistent_rms=0.2, adam_learning_rate=0.01
        ),
        lambda: optax.contrib.muon(
            0.05,
            DION,
            beta=0.9,
            nesterov=False,
            adaptive=True,
            consistent_rms=0.2,
            adam_learning_rate=0.01,
            adam_b1=0.9,
            adam_b2=0.999,
        ),
        SHAPES,
    ),
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


def test_sm3_treats_scalars_as_vectors_with_a_float64_reference():
    """optax's SM3 refuses scalar leaves; gradtx's gives them Adagrad with momentum (singleton covers)."""
    params, grads = _problem({"s": (), "v": (4,)})
    actual, _ = helpers.run(gradtx.sm3(0.1, momentum=0.5), params, grads)
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    acc = {k: np.zeros_like(v) for k, v in p.items()}
    mom = {k: np.zeros_like(v) for k, v in p.items()}
    for t, g in enumerate(grads):
        for k in p:
            gk = np.asarray(g[k], np.float64)
            acc[k] = acc[k] + gk**2
            mom[k] = 0.5 * mom[k] + 0.5 * gk / np.sqrt(acc[k] + 1e-8)
            p[k] = p[k] - 0.1 * mom[k]
        helpers.assert_trees_close(actual[t], p, rtol=1e-5, atol=1e-6, msg=f"step {t + 1}")


def test_muon_sends_matrices_to_muon_and_the_rest_to_a_fallback():
    params, grads = _problem()
    tx = gradtx.muon(0.05, fallback=gradtx.sgd(0.5))
    updates, state = tx.update(grads[0], tx.init(params), params)
    np.testing.assert_allclose(updates["b"], -0.5 * grads[0]["b"], rtol=1e-6)  # the fallback: plain SGD
    np.testing.assert_allclose(updates["conv"], -0.5 * grads[0]["conv"], rtol=1e-6)
    singular = np.linalg.svd(np.asarray(updates["w"]) / -0.05, compute_uv=False)
    assert 0.5 < singular.min() and singular.max() < 1.3  # orthogonalised (the quintic's band around 1)
    momentum = gradtx.get_slot(state, "momentum")
    assert momentum["b"] is None and momentum["w"].shape == (6, 4)


CONFIGS = [
    ({"class": "Adafactor", "min_dim_size_to_factor": 2}, "adafactor", {"min_dim_size_to_factor": 2}),
    (
        {"class": "LAMB", "learning_rate": 0.1, "beta1": 0.8, "epsilon": 1e-4},
        "lamb",
        {"b1": 0.8, "eps": 1e-4},
    ),
    ({"class": "NovoGrad", "learning_rate": 0.1, "beta2": 0.5}, "novograd", {"b2": 0.5}),
    ({"class": "SM3", "learning_rate": 0.1, "momentum": 0.5}, "sm3", {"momentum": 0.5}),
    ({"class": "Muon", "learning_rate": 0.1, "beta": 0.9}, "muon", {"beta": 0.9}),
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
        (gradtx.lamb, {"learning_rate": 0.1, "b2": 1.0}, ValueError, r"`lamb`: `b2` must be in \[0.0, 1.0\)"),
        (
            gradtx.lamb,
            {"learning_rate": 0.1, "min_norm": -1.0},
            ValueError,
            r"`lamb`: `min_norm` must be >= 0",
        ),
        (gradtx.lamb, {"learning_rate": -0.1}, ValueError, r"`lamb`: `learning_rate` must be >= 0"),
        (gradtx.novograd, {"learning_rate": 0.1, "b1": -0.1}, ValueError, r"`novograd`: `b1` must be in"),
        (
            gradtx.novograd,
            {"learning_rate": 0.1, "eps": float("nan")},
            ValueError,
            r"`novograd`: `eps` must be finite",
        ),
        (
            gradtx.sm3,
            {"learning_rate": 0.1, "momentum": 1.5},
            ValueError,
            r"`sm3`: `momentum` must be in \[0.0, 1.0\]",
        ),
        (gradtx.sm3, {"learning_rate": 0.1, "eps": -1e-8}, ValueError, r"`sm3`: `eps` must be >= 0"),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "ns_coeffs": (1.0, 2.0)},
            ValueError,
            r"`muon`: `ns_coeffs` must be three",
        ),
        (gradtx.muon, {"learning_rate": 0.1, "ns_steps": 0}, ValueError, r"`muon`: `ns_steps` must be >= 1"),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "beta": 1.0},
            ValueError,
            r"`muon`: `beta` must be in \[0.0, 1.0\)",
        ),
        (gradtx.muon, {"learning_rate": 0.1, "adam_b2": 1.0}, ValueError, r"`muon`: `adam_b2` must be in"),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "consistent_rms": 0.0},
            ValueError,
            r"`muon`: `consistent_rms` must be > 0",
        ),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "adam_learning_rate": -1.0},
            ValueError,
            r"`adam_learning_rate` must be >= 0",
        ),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "fallback": 3},
            TypeError,
            r"`muon`: `fallback` must be a gradient",
        ),
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
