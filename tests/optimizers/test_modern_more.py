"""AdEMAMix, simplified AdEMAMix, ADOPT, MADGRAD, ACProp, Fromage, optimistic GD / Adam, noisy SGD and AdaMaxW
against optax, 20 steps on the same gradients (gradtx/optimizers/_modern_adam.py, _modern_more.py, and their
optax_compat aliases in gradtx/optax_compat/_aliases_modern.py).

Both libraries get the hyperparameters as users write them, Python floats. The jitted runs
of every case are one compiled program per library (a `lax.scan` of 20 steps per case), so
the file stays cheap; the eager runs take 5 steps, with the defaults. The optax_compat aliases are compared
with optax state and all (the same tree of state classes, the same numbers).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as optax_compat
from gradtx.optax_compat import contrib as compat
from tests import helpers

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
MASK = {"w": True, "b": False, "s": False}
STEPS = 20


def _problem(seed=0, steps=STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = {k: jnp.asarray(rng.standard_normal((steps, *s)), jnp.float32) for k, s in SHAPES.items()}
    return params, grads


def _decaying(count):
    return 0.1 * 0.9**count


def _warmup(count):
    return jnp.minimum(1.0, (count + 1) / 10.0) * 0.999


def _clip_bound(count):
    return 0.5 + 0.1 * count


def _deprecated(factory, *args):
    """`factory(*args)`, which warns that it is deprecated (optax's `optimistic_adam` does)."""
    with pytest.warns(DeprecationWarning, match="`optimistic_adam` is deprecated"):
        return factory(*args)


# name: (gradtx, optax_compat, optax); each a function of no arguments building the optimizer
CASES = {
    "ademamix": (
        lambda: gradtx.ademamix(0.05),
        lambda: compat.ademamix(0.05),
        lambda: optax.contrib.ademamix(0.05),
    ),
    "ademamix-schedules-wd-mask": (
        lambda: gradtx.ademamix(_decaying, 0.8, 0.99, _warmup, 2.0, 1e-6, 1e-8, 0.1, mask=MASK),
        lambda: compat.ademamix(_decaying, 0.8, 0.99, _warmup, 2.0, 1e-6, 1e-8, weight_decay=0.1, mask=MASK),
        lambda: optax.contrib.ademamix(
            _decaying, 0.8, 0.99, _warmup, 2.0, 1e-6, 1e-8, weight_decay=0.1, mask=MASK
        ),
    ),
    "simplified_ademamix": (
        lambda: gradtx.simplified_ademamix(0.005),
        lambda: compat.simplified_ademamix(0.005),
        lambda: optax.contrib.simplified_ademamix(0.005),
    ),
    "simplified_ademamix-alpha-wd": (
        lambda: gradtx.simplified_ademamix(_decaying, 0.9, 0.99, 2.0, 1e-6, 1e-8, 0.05),
        lambda: compat.simplified_ademamix(_decaying, 0.9, 0.99, 2.0, 1e-6, 1e-8, 0.05),
        lambda: optax.contrib.simplified_ademamix(_decaying, 0.9, 0.99, 2.0, 1e-6, 1e-8, 0.05),
    ),
    "adopt": (
        lambda: gradtx.adopt(0.05),
        lambda: compat.adopt(0.05),
        lambda: optax.contrib.adopt(0.05),
    ),
    "adopt-nesterov-no-clipping": (
        lambda: gradtx.adopt(_decaying, 0.8, 0.99, 1e-4, nesterov=True, use_clipping=False),
        lambda: compat.adopt(_decaying, 0.8, 0.99, 1e-4, nesterov=True, use_clipping=False),
        lambda: optax.contrib.adopt(_decaying, 0.8, 0.99, 1e-4, nesterov=True, use_clipping=False),
    ),
    "adopt-clip-fn": (
        lambda: gradtx.adopt(0.05, clip_value_fn=_clip_bound),
        lambda: compat.adopt(0.05, clip_value_fn=_clip_bound),
        lambda: optax.contrib.adopt(0.05, clip_value_fn=_clip_bound),
    ),
    "acprop": (
        lambda: gradtx.acprop(0.05),
        lambda: compat.acprop(0.05),
        lambda: optax.contrib.acprop(0.05),
    ),
    "acprop-schedule-wd-mask": (
        lambda: gradtx.acprop(_decaying, 0.8, 0.99, 1e-8, 1e-10, 0.1, mask=MASK),
        lambda: compat.acprop(_decaying, 0.8, 0.99, 1e-8, 1e-10, 0.1, mask=MASK),
        lambda: optax.contrib.acprop(_decaying, 0.8, 0.99, 1e-8, 1e-10, 0.1, mask=MASK),
    ),
    "madgrad": (
        lambda: gradtx.madgrad(0.05),
        lambda: compat.madgrad(0.05),
        lambda: optax.contrib.madgrad(0.05),
    ),
    "madgrad-schedule-wd": (
        lambda: gradtx.madgrad(_decaying, 0.5, 0.1, 1e-4),
        lambda: compat.madgrad(_decaying, 0.5, 0.1, 1e-4),
        lambda: optax.contrib.madgrad(_decaying, 0.5, 0.1, 1e-4),
    ),
    "fromage": (
        lambda: gradtx.fromage(0.05),
        lambda: optax_compat.fromage(0.05),
        lambda: optax.fromage(0.05),
    ),
    "fromage-schedule-min-norm": (
        lambda: gradtx.fromage(_decaying, 0.5),
        lambda: optax_compat.fromage(_decaying, 0.5),
        lambda: optax.fromage(_decaying, 0.5),
    ),
    "optimistic_gradient_descent": (
        lambda: gradtx.optimistic_gradient_descent(0.05),
        lambda: optax_compat.optimistic_gradient_descent(0.05),
        lambda: optax.optimistic_gradient_descent(0.05),
    ),
    "optimistic_gradient_descent-alpha-beta": (
        lambda: gradtx.optimistic_gradient_descent(_decaying, 0.5, 2.0),
        lambda: optax_compat.optimistic_gradient_descent(_decaying, 0.5, 2.0),
        lambda: optax.optimistic_gradient_descent(_decaying, 0.5, 2.0),
    ),
    "optimistic_adam": (
        lambda: gradtx.optimistic_adam(0.05),
        lambda: optax_compat.optimistic_adam_v2(0.05),
        lambda: optax.optimistic_adam_v2(0.05),
    ),
    "optimistic_adam-no-nesterov": (
        lambda: gradtx.optimistic_adam(
            _decaying, alpha=0.5, beta=2.0, b1=0.8, b2=0.99, eps=1e-6, nesterov=False
        ),
        lambda: optax_compat.optimistic_adam_v2(
            _decaying, alpha=0.5, beta=2.0, b1=0.8, b2=0.99, eps=1e-6, nesterov=False
        ),
        lambda: optax.optimistic_adam_v2(
            _decaying, alpha=0.5, beta=2.0, b1=0.8, b2=0.99, eps=1e-6, nesterov=False
        ),
    ),
    "optimistic_adam-v1": (  # optax's deprecated interface: the rate is the optimistic gradient's alpha
        lambda: gradtx.optimistic_adam(1.0, alpha=0.05, beta=0.02, b1=0.8),
        lambda: optax_compat.optimistic_adam(0.05, 0.02, 0.8),
        lambda: _deprecated(optax.optimistic_adam, 0.05, 0.02, 0.8),
    ),
    "noisy_sgd-without-noise": (  # the noise itself is gradtx's: see test_noisy_sgd_draws_optax_s_noise
        lambda: gradtx.noisy_sgd(0.05, eta=0.0),
        lambda: optax_compat.noisy_sgd(0.05, eta=0.0, key=0),
        lambda: optax.noisy_sgd(0.05, eta=0.0, key=0),
    ),
    "adamaxw": (
        lambda: gradtx.adamaxw(0.05),
        lambda: optax_compat.adamaxw(0.05),
        lambda: optax.adamaxw(0.05),
    ),
    "adamaxw-schedule-mask": (
        lambda: gradtx.adamaxw(_decaying, 0.8, 0.99, 1e-6, 0.1, mask=MASK),
        lambda: optax_compat.adamaxw(_decaying, 0.8, 0.99, 1e-6, 0.1, mask=MASK),
        lambda: optax.adamaxw(_decaying, 0.8, 0.99, 1e-6, 0.1, mask=MASK),
    ),
}
OWN_NOISE = {"noisy_sgd-without-noise"}  # optax's key moves every step, gradtx's noise folds in the count


def _scan(tx, params, grads):
    """The params after each of the steps, and the last state (to be traced inside `jax.jit`)."""

    def step(carry, g):
        p, s = carry
        u, s = tx.update(g, s, p)
        p = jax.tree.map(lambda a, b: a + b, p, u)
        return (p, s), p

    (_, state), trajectory = jax.lax.scan(step, (params, tx.init(params)), grads)
    return trajectory, state


def _numpy(x):
    return np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)


@functools.cache
def _jitted_runs():
    """Every case's three trajectories and final states, each library's cases compiled as one program."""
    params, grads = _problem()
    out = {}
    for lib in range(3):
        run = jax.jit(lambda p, g, lib=lib: {n: _scan(c[lib](), p, g) for n, c in CASES.items()})
        out[lib] = jax.tree.map(_numpy, run(params, grads))
    return out


def _assert_close(actual, expected, msg):
    helpers.assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6, msg=msg)


@pytest.mark.parametrize("name", CASES)
def test_twenty_jitted_steps_equal_optax(name):
    runs = _jitted_runs()
    expected, optax_state = runs[2][name]
    for lib, label in ((0, "gradtx"), (1, "optax_compat")):
        trajectory, _ = runs[lib][name]
        for t in range(STEPS):
            step = jax.tree.map(lambda x, t=t: x[t], (trajectory, expected))
            _assert_close(*step, msg=f"{name} ({label}): step {t + 1}")
    # optax_compat's state is optax's: the same classes, fields and numbers
    compat_state = runs[1][name][1]
    assert str(jax.tree.structure(compat_state)) == str(jax.tree.structure(optax_state))
    if name in OWN_NOISE:
        compat_state, optax_state = (jax.tree.map(np.shape, s) for s in (compat_state, optax_state))
    _assert_close(compat_state, optax_state, msg=f"{name}: state")


@pytest.mark.parametrize("name", [name for name in CASES if "-" not in name])  # the defaults
def test_five_eager_steps_equal_optax(name):
    params, grads = _problem()
    grads = [jax.tree.map(lambda g, t=t: g[t], grads) for t in range(5)]
    ours, _, theirs = CASES[name]
    actual, _ = helpers.run(ours(), params, grads)
    expected, _ = helpers.run(theirs(), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        _assert_close(a, e, msg=f"{name}: step {t + 1}")


def test_noisy_sgd_draws_optax_s_noise():
    """Zero gradients, rate 1: the steps are the noise. Each step's is centred, of standard deviation
    sqrt(eta / t^gamma) (within 1%: 16 standard errors on 2**17 draws) like optax's, and new at every step."""
    eta, gamma, n = 0.3, 0.8, 2**17
    params = jnp.zeros(n)

    @jax.jit
    def steps(params):
        out = []
        for tx in (gradtx.noisy_sgd(1.0, eta, gamma, seed=5), optax_compat.noisy_sgd(1.0, eta, gamma, key=5)):
            state = tx.init(params)
            for _ in range(3):
                u, state = tx.update(jnp.zeros(n), state, params)
                out.append(-u)
        tx = optax.noisy_sgd(1.0, eta, gamma, key=5)
        state = tx.init(params)
        for _ in range(3):
            u, state = tx.update(jnp.zeros(n), state, params)
            out.append(-u)
        return jnp.stack(out).reshape(3, 3, n)

    noise = np.asarray(steps(params), np.float64)
    np.testing.assert_array_equal(noise[0], noise[1])  # optax_compat's is gradtx's
    for t in range(3):
        want = np.sqrt(eta / (t + 1) ** gamma)
        for lib in (0, 2):
            np.testing.assert_allclose(noise[lib, t].std(), want, rtol=0.01, err_msg=f"{lib}: step {t + 1}")
            assert abs(noise[lib, t].mean()) < 5 * want / np.sqrt(n), (lib, t)
    assert abs(np.corrcoef(noise[0, 0], noise[0, 1])[0, 1]) < 0.02


def test_optimistic_adam_v1_takes_no_schedule_as_optax():
    with pytest.raises(ValueError, match="does not support learning rate schedules"):
        optax_compat.optimistic_adam(_decaying)


def test_noisy_sgd_takes_a_key_or_a_seed_not_both():
    with pytest.raises(ValueError, match=r"`noisy_sgd`: give `key` or `seed` \(deprecated\), not both"):
        optax_compat.noisy_sgd(0.1, key=1, seed=1)
    params = jnp.zeros(3)
    for tx in (optax_compat.noisy_sgd(0.1, key=jax.random.key(4)), optax_compat.noisy_sgd(0.1, seed=4)):
        assert tx.init(params)[0].rng_key == jax.random.key(4)


def test_all_are_element_wise_but_fromage_and_masked_decays():
    for make in (gradtx.ademamix, gradtx.simplified_ademamix, gradtx.adopt, gradtx.acprop, gradtx.madgrad):
        assert isinstance(make(0.1), gradtx.ElementWise), make
    for make in (gradtx.optimistic_gradient_descent, gradtx.optimistic_adam, gradtx.adamaxw):
        assert isinstance(make(0.1), gradtx.ElementWise), make
    assert not isinstance(gradtx.fromage(0.1), gradtx.ElementWise)  # a trust ratio per leaf
    assert not isinstance(gradtx.ademamix(0.1, mask=["w"]), gradtx.ElementWise)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (gradtx.ademamix, {"b3": 1.0}, ValueError, r"`ademamix`: `b3` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.ademamix, {"alpha": -1.0}, ValueError, r"`ademamix`: `alpha` must be >= 0"),
        (
            gradtx.ademamix,
            {"mu_dtype": jnp.int32},
            TypeError,
            r"`ademamix`: `mu_dtype` must be None or a float",
        ),
        (
            gradtx.simplified_ademamix,
            {"b1": 1.5},
            ValueError,
            r"`simplified_ademamix`: `b1` must be in \[0.0",
        ),
        (
            gradtx.simplified_ademamix,
            {"eps_root": -1.0},
            ValueError,
            r"`simplified_ademamix`: `eps_root` must be",
        ),
        (gradtx.adopt, {"b2": 1.0}, ValueError, r"`adopt`: `b2` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.adopt, {"eps": float("nan")}, ValueError, r"`adopt`: `eps` must be finite"),
        (gradtx.adopt, {"nesterov": 1}, TypeError, r"`adopt`: `nesterov` must be True or False"),
        (gradtx.adopt, {"clip_value_fn": 0.5}, TypeError, r"`adopt`: `clip_value_fn` must be callable"),
        (gradtx.acprop, {"b1": -0.1}, ValueError, r"`acprop`: `b1` must be in \[0.0, 1.0\)"),
        (gradtx.acprop, {"weight_decay": -1.0}, ValueError, r"`acprop`: `weight_decay` must be >= 0"),
        (
            gradtx.madgrad,
            {"momentum": 1.0},
            ValueError,
            r"`madgrad`: `momentum` must be in \[0.0, 1.0\), got 1.0",
        ),
        (gradtx.madgrad, {"learning_rate": -0.1}, ValueError, r"`madgrad`: `learning_rate` must be >= 0"),
        (gradtx.fromage, {"learning_rate": -0.1}, ValueError, r"`fromage`: `learning_rate` must be >= 0"),
        (gradtx.fromage, {"min_norm": -1.0}, ValueError, r"`fromage`: `min_norm` must be >= 0"),
        (
            gradtx.optimistic_gradient_descent,
            {"beta": float("inf")},
            ValueError,
            r"`optimistic_gradient_descent`: `beta` must be finite",
        ),
        (gradtx.optimistic_adam, {"b2": 1.0}, ValueError, r"`optimistic_adam`: `b2` must be in \[0.0, 1.0\)"),
        (gradtx.noisy_sgd, {"eta": -0.1}, ValueError, r"`noisy_sgd`: `eta` must be >= 0, got -0.1"),
        (gradtx.noisy_sgd, {"gamma": "0.5"}, TypeError, r"`noisy_sgd`: `gamma` must be a number"),
        (gradtx.noisy_sgd, {"seed": 0.5}, TypeError, r"`noisy_sgd`: `seed` must be an int"),
        (gradtx.adamaxw, {"eps": -1.0}, ValueError, r"`adamaxw`: `eps` must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**{"learning_rate": 0.1, **kwargs})
