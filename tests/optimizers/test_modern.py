"""Lion, RAdam, AdaBelief, Yogi, Adan, NAdamW, signSGD, Signum and Rprop against optax, 20 steps on the same
gradients (gradtx/optimizers/_modern.py, _modern_sign.py).

Both are given the hyperparameters as users write them, Python floats: gradtx combines them
in double precision as optax does (`gradtx.update_rule`'s dtype policy), so `1 - b2` and
RAdam's rho_inf are optax's numbers, jitted and eagerly (RAdam's rho_t lies within a few
hundredths of the threshold 5 at step 5: a float32 rho_inf would move the first rectified
step and the trajectories would part there). Rprop is checked against a float64 transcription
of the paper and against the state optax writes (optax 0.2.8 returns its update one step
late; see `gradtx.scale_by_rprop`).
"""

from __future__ import annotations

import jax
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
    "lion": (lambda: gradtx.lion(0.01), lambda: optax.lion(0.01, 0.9, 0.99)),
    "lion-mask-schedule-wd": (
        lambda: gradtx.lion(_decaying, 0.8, 0.95, weight_decay=0.1, mask=MASK),
        lambda: optax.lion(_decaying, 0.8, 0.95, weight_decay=0.1, mask=MASK),
    ),
    "radam": (lambda: gradtx.radam(0.05), lambda: optax.radam(0.05, 0.9, 0.999)),
    "radam-nesterov-paper-threshold": (
        lambda: gradtx.radam(_decaying, 0.8, 0.99, 1e-4, 1e-6, threshold=4.0, nesterov=True),
        lambda: optax.radam(_decaying, 0.8, 0.99, 1e-4, 1e-6, threshold=4.0, nesterov=True),
    ),
    "adabelief": (lambda: gradtx.adabelief(0.05), lambda: optax.adabelief(0.05, 0.9, 0.999)),
    "adabelief-nesterov": (
        lambda: gradtx.adabelief(0.05, 0.8, 0.99, 1e-8, 0.0, nesterov=True),
        lambda: optax.adabelief(0.05, 0.8, 0.99, 1e-8, 0.0, nesterov=True),
    ),
    "yogi": (lambda: gradtx.yogi(0.05), lambda: optax.yogi(0.05, 0.9, 0.999)),
    "adan": (
        lambda: gradtx.adan(0.05, weight_decay=0.01),
        lambda: optax.adan(0.05, 0.98, 0.92, 0.99, weight_decay=0.01),
    ),
    "adan-mask-schedule": (
        lambda: gradtx.adan(_decaying, 0.9, 0.8, 0.95, 1e-6, 0.0, 0.05, mask=MASK),
        lambda: optax.adan(_decaying, 0.9, 0.8, 0.95, 1e-6, 0.0, 0.05, mask=MASK),
    ),
    "nadamw": (lambda: gradtx.nadamw(0.05), lambda: optax.nadamw(0.05, 0.9, 0.999)),
    "nadamw-mask": (
        lambda: gradtx.nadamw(_decaying, 0.8, 0.99, weight_decay=0.1, mask=MASK),
        lambda: optax.nadamw(_decaying, 0.8, 0.99, weight_decay=0.1, mask=MASK),
    ),
    "sign_sgd": (lambda: gradtx.sign_sgd(_decaying), lambda: optax.sign_sgd(_decaying)),
    "signum": (lambda: gradtx.signum(0.01, 0.8), lambda: optax.signum(0.01, 0.8)),
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


# --------------------------------------------------------------------------- Rprop


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


# --------------------------------------------------------------------------- kinds, names, errors

ELEMENT_WISE = {
    "lion": lambda **kw: gradtx.lion(0.1, **kw),
    "adan": lambda **kw: gradtx.adan(0.1, **kw),
    "nadamw": lambda **kw: gradtx.nadamw(0.1, **kw),
    "radam": lambda **kw: gradtx.radam(0.1),
    "adabelief": lambda **kw: gradtx.adabelief(0.1),
    "yogi": lambda **kw: gradtx.yogi(0.1),
    "sign_sgd": lambda **kw: gradtx.sign_sgd(0.1),
    "signum": lambda **kw: gradtx.signum(0.1),
    "rprop": lambda **kw: gradtx.rprop(0.1),
}


def test_all_are_element_wise_unless_a_decay_mask_looks_at_paths():
    for name, make in ELEMENT_WISE.items():
        assert isinstance(make(), gradtx.ElementWise), name
    for name in ("lion", "adan", "nadamw"):
        assert isinstance(ELEMENT_WISE[name](mask=["w"]), gradtx.LeafWise), name


CONFIGS = [
    ({"class": "Lion", "learning_rate": 0.1, "beta1": 0.8}, "lion", {"b1": 0.8}),
    ({"class": "RAdam", "learning_rate": 0.1, "epsilon": 1e-6}, "radam", {"eps": 1e-6}),
    ({"class": "AdaBelief", "learning_rate": 0.1, "beta2": 0.99}, "adabelief", {"b2": 0.99}),
    ({"class": "Yogi", "learning_rate": 0.1, "epsilon": 1e-4}, "yogi", {"eps": 1e-4}),
    ({"class": "Adan", "learning_rate": 0.1, "b3": 0.9, "weight_decay": 0.01}, "adan", {"b3": 0.9}),
    ({"class": "NAdamW", "learning_rate": 0.1, "weight_decay": 0.01}, "nadamw", {"weight_decay": 0.01}),
    ({"class": "SignSGD", "learning_rate": 0.1}, "sign_sgd", {"learning_rate": 0.1}),
    ({"class": "Signum", "learning_rate": 0.1, "beta": 0.5}, "signum", {"beta": 0.5}),
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
        (gradtx.lion, {"b1": 1.5}, ValueError, r"`lion`: `b1` must be in \[0.0, 1.0\], got 1.5"),
        (gradtx.lion, {"weight_decay": -1.0}, ValueError, r"`lion`: `weight_decay` must be >= 0"),
        (gradtx.lion, {"mu_dtype": jnp.int32}, TypeError, r"`lion`: `mu_dtype` must be None or a floating"),
        (gradtx.radam, {"b2": 1.0}, ValueError, r"`radam`: `b2` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.radam, {"threshold": 3.0}, ValueError, r"`radam`: `threshold` must be in \[4.0, inf\]"),
        (gradtx.radam, {"nesterov": 1}, TypeError, r"`radam`: `nesterov` must be True or False"),
        (gradtx.adabelief, {"eps": -1e-16}, ValueError, r"`adabelief`: `eps` must be >= 0"),
        (gradtx.adabelief, {"eps_root": float("nan")}, ValueError, r"`adabelief`: `eps_root` must be finite"),
        (gradtx.yogi, {"b1": -0.1}, ValueError, r"`yogi`: `b1` must be in \[0.0, 1.0\)"),
        (
            gradtx.yogi,
            {"initial_accumulator_value": -1.0},
            ValueError,
            r"`yogi`: `initial_accumulator_value` must be >= 0",
        ),
        (
            gradtx.yogi,
            {"initial_accumulator_value": lambda count: 1.0},
            TypeError,
            r"`yogi`: `initial_accumulator_value` must be a number or a scalar array \(not a schedule",
        ),
        (gradtx.adan, {"b3": 1.0}, ValueError, r"`adan`: `b3` must be in \[0.0, 1.0\)"),
        (gradtx.adan, {"learning_rate": -0.1}, ValueError, r"`adan`: `learning_rate` must be >= 0"),
        (gradtx.nadamw, {"b1": 1.0}, ValueError, r"`nadamw`: `b1` must be in \[0.0, 1.0\)"),
        (gradtx.nadamw, {"weight_decay": float("inf")}, ValueError, r"`nadamw`: `weight_decay` must be"),
        (
            gradtx.sign_sgd,
            {"learning_rate": "0.1"},
            TypeError,
            r"`sign_sgd`: `learning_rate` must be a number",
        ),
        (gradtx.signum, {"beta": 1.5}, ValueError, r"`signum`: `beta` must be in \[0.0, 1.0\], got 1.5"),
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
