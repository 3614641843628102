"""gradtx/_algorithms/rprop.py: Rprop against a float64 transcription of the paper and against the
state optax writes (optax 0.2.8 returns its update one step late; see `gradtx.scale_by_rprop`), its
scheduled initial step, its config names and its errors."""

from __future__ import annotations

import jax
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


def _rprop_reference(params, grads, lr, eta_minus=0.5, eta_plus=1.2, lo=1e-6, hi=50.0):
    """iRprop- in float64 from Riedmiller & Braun (1993) with Igel & Huesken's (2000) reset: per element, the
    step grows by eta_plus while g_t g_{t-1} > 0, shrinks by eta_minus (and the update is skipped, g_t := 0)
    when it is < 0; the parameter moves by -step * sign(g_t)."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    step = {k: np.full(np.shape(v), lr) for k, v in p.items()}
    last = {k: np.zeros(np.shape(v)) for k, v in p.items()}
    trajectory, steps = [], []
    for g in grads:
        for k in p:
            gk = np.asarray(g[k], np.float64)
            agreement = gk * last[k]
            step[k] = np.where(
                agreement > 0,
                np.minimum(step[k] * eta_plus, hi),
                np.where(agreement < 0, np.maximum(step[k] * eta_minus, lo), step[k]),
            )
            gk = np.where(agreement < 0, 0.0, gk)
            p[k] = p[k] - step[k] * np.sign(gk)
            last[k] = gk
        trajectory.append({k: v.copy() for k, v in p.items()})
        steps.append({k: v.copy() for k, v in step.items()})
    return trajectory, steps


@pytest.mark.parametrize(
    "kwargs", [{}, {"eta_minus": 0.3, "eta_plus": 1.5, "min_step_size": 0.02, "max_step_size": 0.2}]
)
def test_rprop_follows_the_paper_in_float64(kwargs):
    params, grads = _problem(seed=1)
    # gradients that mostly keep their sign, so steps grow to the bound as well as shrink
    grads = [{k: g[k] + 0.8 * jnp.sign(grads[0][k]) for k in g} for g in grads]
    actual, state = helpers.run(gradtx.rprop(0.05, **kwargs), params, grads)
    names = {"eta_minus": "eta_minus", "eta_plus": "eta_plus", "min_step_size": "lo", "max_step_size": "hi"}
    expected, steps = _rprop_reference(params, grads, 0.05, **{names[k]: v for k, v in kwargs.items()})
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"step {t + 1}")
    helpers.assert_trees_close(gradtx.get_slot(state, "step_sizes"), steps[-1], rtol=1e-6, atol=0)


def test_rprop_updates_and_step_sizes_are_those_optax_writes_into_its_state():
    """Step by step on the same gradients: gradtx's update is optax's freshly computed `prev_updates` (which
    optax 0.2.8 returns one step later), and the step sizes are equal."""
    params, grads = _problem(seed=2)
    ours, theirs = gradtx.scale_by_rprop(0.05), optax.scale_by_rprop(0.05)
    s_ours, s_theirs = ours.init(params), theirs.init(params)
    step_ours, step_theirs = jax.jit(ours.update), jax.jit(theirs.update)
    for t, g in enumerate(grads):
        u, s_ours = step_ours(g, s_ours, params)
        _, s_theirs = step_theirs(g, s_theirs, params)
        helpers.assert_trees_close(u, s_theirs.prev_updates, rtol=1e-6, atol=0, msg=f"update {t + 1}")
        helpers.assert_trees_close(s_ours.step_sizes, s_theirs.step_sizes, rtol=1e-6, atol=0, msg=f"{t + 1}")


def test_rprop_reads_a_scheduled_initial_step_at_count_zero():
    state = gradtx.rprop(lambda count: 0.25 + count).init({"w": jnp.zeros(3)})
    np.testing.assert_array_equal(gradtx.get_slot(state, "step_sizes")["w"], [0.25] * 3)


CONFIGS = [
    ({"class": "Rprop", "learning_rate": 0.1, "eta_plus": 1.1}, "rprop", {"eta_plus": 1.1}),
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
        (gradtx.rprop, {"learning_rate": 0.0}, ValueError, r"`rprop`: `learning_rate` must be > 0"),
        (gradtx.rprop, {"eta_minus": 1.0}, ValueError, r"`rprop`: `eta_minus` must be in \(0.0, 1.0\)"),
        (gradtx.rprop, {"eta_plus": 0.9}, ValueError, r"`rprop`: `eta_plus` must be in \[1.0, inf\]"),
        (gradtx.rprop, {"min_step_size": -1.0}, ValueError, r"`rprop`: `min_step_size` must be >= 0"),
        (
            gradtx.rprop,
            {"min_step_size": 1.0, "max_step_size": 0.5},
            ValueError,
            r"`rprop`: `min_step_size` must be <= `max_step_size`, got 1.0 > 0.5",
        ),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    if factory is not gradtx.rprop or "learning_rate" not in kwargs:
        kwargs = {"learning_rate": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        factory(**kwargs)
