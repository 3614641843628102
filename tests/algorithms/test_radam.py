"""gradtx/_algorithms/radam.py: RAdam against optax's, 20 steps on the same gradients, its first momentum
steps, its config names and its errors.

Both are given the hyperparameters as users write them, Python floats: gradtx combines them in double
precision as optax does (`gradtx.update_rule`'s dtype policy), so RAdam's rho_inf is optax's number, jitted
and eagerly (RAdam's rho_t lies within a few hundredths of the threshold 5 at step 5: a float32 rho_inf
would move the first rectified step and the trajectories would part there).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import catalog, helpers

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}


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
    "radam": (lambda: gradtx.radam(0.05), lambda: optax.radam(0.05, 0.9, 0.999)),
    "radam-nesterov-paper-threshold": (
        lambda: gradtx.radam(_decaying, 0.8, 0.99, 1e-4, 1e-6, threshold=4.0, nesterov=True),
        lambda: optax.radam(_decaying, 0.8, 0.99, 1e-4, 1e-6, threshold=4.0, nesterov=True),
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


def test_radam_takes_momentum_steps_until_rho_reaches_the_threshold():
    """With the defaults the first 5 steps are bias-corrected momentum (-lr m_hat), the 6th is rectified."""
    params, grads = _problem(steps=6)
    p0 = params["b"]
    got, _ = helpers.run(gradtx.radam(1.0), {"b": p0}, [{"b": g["b"]} for g in grads])
    m = np.zeros(5)
    for t, g in enumerate(grads, start=1):
        m = 0.9 * m + 0.1 * np.asarray(g["b"], np.float64)
        step = np.asarray(got[t - 1]["b"], np.float64) - np.asarray(got[t - 2]["b"] if t > 1 else p0)
        if t <= 5:
            np.testing.assert_allclose(step, -m / (1 - 0.9**t), rtol=2e-5, err_msg=f"step {t}")
        else:
            assert not np.allclose(step, -m / (1 - 0.9**t), rtol=1e-2), "step 6 should be rectified"


CONFIGS = [
    ({"class": "RAdam", "learning_rate": 0.1, "epsilon": 1e-6}, "radam", {"eps": 1e-6}),
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
        (gradtx.radam, {"b2": 1.0}, ValueError, r"`radam`: `b2` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.radam, {"threshold": 3.0}, ValueError, r"`radam`: `threshold` must be in \[4.0, inf\]"),
        (gradtx.radam, {"nesterov": 1}, TypeError, r"`radam`: `nesterov` must be True or False"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    if factory is not gradtx.rprop or "learning_rate" not in kwargs:
        kwargs = {"learning_rate": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        factory(**kwargs)
