"""gradtx/combinators/_plateau.py: reduce_on_plateau (optax's contrib rule); optax's stateful schedules.

Against optax itself: `optax_compat`'s `reduce_on_plateau` (optax's state layout) and
`gradtx.reduce_on_plateau` (gradtx's) step for step with `optax.contrib.reduce_on_plateau` on a
loss that improves, plateaus, improves again; `inject_stateful_hyperparams` with a
`WrappedSchedule` as `inject_hyperparams` with the schedule.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from optax import contrib

import gradtx
from gradtx import optax_compat as compat
from gradtx.optax_compat import contrib as _stateful
from gradtx.optax_compat import schedules as compat_schedules

TOL = {"rtol": 1e-6, "atol": 1e-6}

# improves, plateaus (with a change smaller than rtol and one smaller than atol), improves, plateaus
LOSSES = np.array(
    [5.0, 4.0, 3.5, 3.5, 3.6, 3.4999, 3.5, 3.5, 3.5, 2.0, 2.0, 2.1, 2.0, 1.99, 2.0, 2.0]
    + [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    np.float32,
)
STEPS = len(LOSSES)

CONFIGS = {
    "patience": {"factor": 0.5, "patience": 2},
    "cooldown_and_min_scale": {"factor": 0.1, "patience": 3, "cooldown": 2, "min_scale": 0.02},
    "accumulation_and_atol": {
        "factor": 0.5,
        "patience": 1,
        "cooldown": 1,
        "accumulation_size": 3,
        "rtol": 0.0,
        "atol": 0.05,
        "min_scale": 0.2,
    },
    "defaults": {},
}


def _trajectory(tx, params, grads, losses):
    """Every step's updates, params and state, one `lax.scan` (the loss passed as `value`)."""

    def step(carry, x):
        p, s = carry
        g, loss = x
        u, s = tx.update(g, s, p, value=loss)
        p = optax.apply_updates(p, u)
        return (p, s), (u, p, s)

    return jax.lax.scan(step, (params, tx.init(params)), (grads, losses))[1]


@pytest.fixture(scope="module")
def trajectories():
    """For each config: optax's, optax_compat's and gradtx's trajectories, all in one jitted program."""
    grads = jnp.asarray(np.random.default_rng(0).standard_normal((STEPS, 3)), jnp.float32)
    params = jnp.asarray([1.0, -2.0, 0.5], jnp.float32)

    def every():
        out = {}
        for name, kw in CONFIGS.items():
            out[name] = tuple(
                _trajectory(optax.chain(sgd(0.1), rop(**kw)), params, grads, jnp.asarray(LOSSES))
                for sgd, rop in (
                    (optax.sgd, contrib.reduce_on_plateau),
                    (compat.sgd, _stateful.reduce_on_plateau),
                    (gradtx.sgd, gradtx.reduce_on_plateau),
                )
            )
        return out

    return jax.tree.map(np.asarray, jax.jit(every)())


@pytest.mark.parametrize("config", list(CONFIGS))
def test_reduce_on_plateau_follows_optax_for_30_steps(trajectories, config):
    theirs, ours, native = trajectories[config]
    (u_t, p_t, s_t), (u_o, p_o, s_o), (u_n, _, s_n) = theirs, ours, native
    np.testing.assert_allclose(u_o, u_t, **TOL)
    np.testing.assert_allclose(p_o, p_t, **TOL)
    np.testing.assert_allclose(u_n, u_t, **TOL)  # gradtx's sgd is TF's: the same numbers for plain SGD
    theirs_state, ours_state, native_state = s_t[1], s_o[1], s_n[1]
    assert type(ours_state).__name__ == "ReduceLROnPlateauState"
    assert ours_state._fields == contrib.ReduceLROnPlateauState._fields
    for field in contrib.ReduceLROnPlateauState._fields:
        np.testing.assert_allclose(getattr(ours_state, field), getattr(theirs_state, field), **TOL)
        gradtx_field = "accumulated" if field == "count" else field
        np.testing.assert_allclose(getattr(native_state, gradtx_field), getattr(theirs_state, field), **TOL)
    assert ours_state.scale.dtype == theirs_state.scale.dtype == np.float32
    assert ours_state.plateau_count.dtype == np.int32 and ours_state.count.dtype == np.int32


def test_the_plateau_configs_exercise_every_rule(trajectories):
    """The comparisons above are not vacuous: each config drops the scale, and cooldown, min_scale and
    accumulation act where configured."""
    scales = {name: trajectories[name][0][2][1].scale for name in CONFIGS}
    np.testing.assert_allclose(scales["patience"][:6], [1, 1, 1, 1, 0.5, 0.5])  # 3.5, 3.6: two without gain
    np.testing.assert_allclose(
        scales["cooldown_and_min_scale"][[4, 5, 11, 12, -1]], [1, 0.1, 0.1, 0.02, 0.02]
    )
    cooling = trajectories["cooldown_and_min_scale"][0][2][1].cooldown_count
    assert list(cooling[4:9]) == [0, 2, 1, 0, 0]
    accumulated = trajectories["accumulation_and_atol"][0][2][1]
    assert list(accumulated.count[:6]) == [1, 2, 0, 1, 2, 0]
    np.testing.assert_allclose(accumulated.scale[[7, 8, 13, 14, 22, 23]], [1, 0.5, 0.5, 0.25, 0.25, 0.2])
    np.testing.assert_allclose(scales["defaults"][27:], [1.0, 0.1, 0.1])  # patience 10 in the last plateau


def test_reduce_on_plateau_eager_steps_equal_optax():
    """Four eager steps (the jitted ones above take 30)."""
    ours = _stateful.reduce_on_plateau(factor=0.5, patience=1)
    theirs = contrib.reduce_on_plateau(factor=0.5, patience=1)
    p = jnp.ones(2)
    s, t = ours.init(p), theirs.init(p)
    for loss in (3.0, 3.0, 2.0, 2.0):
        u, s = ours.update(jnp.ones(2), s, p, value=loss)
        v, t = theirs.update(jnp.ones(2), t, p, value=loss)
        np.testing.assert_allclose(u, v, **TOL)
        for a, b in zip(s, t, strict=True):
            np.testing.assert_allclose(a, b, **TOL)
    assert float(s.scale) == 0.25  # a drop at each step without improvement


def test_reduce_on_plateau_keeps_bf16_scale_and_f32_losses_for_mixed_params():
    params = {"a": jnp.zeros(2, jnp.bfloat16), "b": jnp.zeros(2, jnp.float32)}
    state = gradtx.reduce_on_plateau().init(params)
    theirs = contrib.reduce_on_plateau().init(params)
    assert state.scale.dtype == theirs.scale.dtype == jnp.bfloat16
    assert state.best_value.dtype == theirs.best_value.dtype == jnp.float32


def test_reduce_on_plateau_without_the_loss_says_how_to_call_it():
    tx = gradtx.reduce_on_plateau()
    with pytest.raises(gradtx.MissingExtraArgError, match=r"`reduce_on_plateau`: `update` needs the extra "):
        tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"factor": 0.0}, ValueError, r"`factor` must be in \(0.0, 1.0\), got 0.0"),
        ({"factor": 1.0}, ValueError, r"`factor` must be in \(0.0, 1.0\), got 1.0"),
        (
            {"factor": lambda c: 0.5},
            TypeError,
            r"`factor` must be a number or a scalar array \(not a schedule",
        ),
        ({"rtol": -0.1}, ValueError, r"`rtol` must be in \[0.0, 1.0\], got -0.1"),
        ({"rtol": 1.5}, ValueError, r"`rtol` must be in \[0.0, 1.0\], got 1.5"),
        ({"atol": -1.0}, ValueError, r"`atol` must be >= 0, got -1.0"),
        ({"rtol": 0.0, "atol": 0.0}, ValueError, r"at least one of `rtol` and `atol` must be > 0"),
        ({"patience": 0}, ValueError, r"`patience` must be >= 1, got 0"),
        ({"patience": 2.5}, TypeError, r"`patience` must be an integer, got 2.5"),
        ({"cooldown": -1}, ValueError, r"`cooldown` must be >= 0, got -1"),
        ({"accumulation_size": 0}, ValueError, r"`accumulation_size` must be >= 1, got 0"),
        ({"min_scale": -0.5}, ValueError, r"`min_scale` must be >= 0, got -0.5"),
        ({"min_scale": float("nan")}, ValueError, r"`min_scale` must be finite, got nan"),
    ],
)
@pytest.mark.parametrize(
    "factory", [gradtx.reduce_on_plateau, _stateful.reduce_on_plateau], ids=["gradtx", "compat"]
)
def test_reduce_on_plateau_refuses_bad_arguments(factory, kwargs, error, match):
    with pytest.raises(error, match=rf"`reduce_on_plateau`: {match}"):
        factory(**kwargs)


def test_a_traced_zero_tolerance_under_inject_hyperparams_gives_nan_updates():
    """Injected (traced) `rtol` and `atol` both 0 cannot raise in a jitted step: its updates are NaN."""
    tx = gradtx.inject_hyperparams(gradtx.reduce_on_plateau)(rtol=1e-4, atol=0.0)
    state = tx.init(jnp.zeros(2))
    step = jax.jit(lambda s: tx.update(jnp.ones(2), s, value=1.0))
    assert bool(jnp.all(jnp.isfinite(step(state)[0])))
    state.hyperparams["rtol"] = 0.0
    assert bool(jnp.all(jnp.isnan(step(state)[0])))


# --------------------------------------------------------------------------- stateful schedules


def test_optax_schedules_names_are_in_optax_compat_schedules():
    names = {n for n in dir(optax.schedules) if not n.startswith("_")}
    assert names <= set(compat_schedules.__all__)
    assert compat_schedules.WrappedSchedule is compat.WrappedSchedule
    assert isinstance(compat.WrappedSchedule(lambda c: c), compat_schedules.StatefulSchedule)
    assert isinstance(optax.WrappedSchedule(lambda c: c), compat_schedules.StatefulSchedule)


def test_inject_stateful_hyperparams_with_a_wrapped_schedule_equals_inject_hyperparams_and_optax():
    """20 jitted steps: `WrappedSchedule(schedule)` through `inject_stateful_hyperparams` is
    `inject_hyperparams` with `schedule` (values, states and updates), and optax's own."""
    schedule = compat.linear_schedule(0.1, 0.01, transition_steps=15)
    their_schedule = optax.linear_schedule(0.1, 0.01, transition_steps=15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        stateful = compat.inject_stateful_hyperparams(compat.adam)(
            learning_rate=compat.WrappedSchedule(schedule), b1=0.8
        )
        theirs = optax.inject_stateful_hyperparams(optax.adam)(
            learning_rate=optax.WrappedSchedule(their_schedule), b1=0.8
        )
    plain = compat.inject_hyperparams(compat.adam)(learning_rate=schedule, b1=0.8)
    grads = jnp.asarray(np.random.default_rng(1).standard_normal((20, 3)), jnp.float32)
    params = jnp.zeros(3)

    def run(tx):
        def step(carry, g):
            p, s = carry
            u, s = tx.update(g, s, p)
            return (optax.apply_updates(p, u), s), (u, s.hyperparams["learning_rate"])

        (p, s), (us, lrs) = jax.lax.scan(step, (params, tx.init(params)), grads)
        return p, s, us, lrs

    out = jax.jit(lambda: tuple(run(tx) for tx in (stateful, plain, theirs)))()
    (p1, s1, u1, lr1), (p2, s2, u2, lr2), (p3, s3, u3, lr3) = out
    for a, b in ((u1, u2), (u1, u3), (lr1, lr2), (lr1, lr3), (p1, p3)):
        np.testing.assert_allclose(a, b, **TOL)
    assert int(s1.hyperparams_states["learning_rate"].count) == int(
        s3.hyperparams_states["learning_rate"].count
    )
    assert int(s1.hyperparams_states["learning_rate"].count) == 20
    assert float(lr1[-1]) == pytest.approx(0.01) and float(lr1[0]) == pytest.approx(0.1)
    assert jax.tree.structure(s1) == jax.tree.structure(s2)


class _LossDriven:
    """A stateful schedule of another kind: its state is the last loss it was given."""

    def init(self):
        return jnp.asarray(1.0)

    def update(self, state, value=1.0, **extra_args):
        return jnp.asarray(value, jnp.float32)

    def __call__(self, state, **extra_args):
        return 0.1 * state


def test_gradtx_inject_hyperparams_takes_a_wrapped_schedule_as_its_schedule():
    schedule = compat.linear_schedule(0.1, 0.01, transition_steps=3)
    outs = []
    for lr in (schedule, compat.WrappedSchedule(schedule), optax.WrappedSchedule(schedule)):
        tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=lr)
        state, us = tx.init(jnp.zeros(2)), []
        for _ in range(4):
            u, state = tx.update(jnp.ones(2), state)
            us.append(u)
        outs.append(np.asarray(us))
    np.testing.assert_allclose(outs[0][:, 0], [-0.1, -0.07, -0.04, -0.01], rtol=1e-6)
    np.testing.assert_array_equal(outs[1], outs[0])
    np.testing.assert_array_equal(outs[2], outs[0])


def test_gradtx_inject_hyperparams_refuses_another_stateful_schedule():
    assert isinstance(_LossDriven(), compat_schedules.StatefulSchedule)
    with pytest.raises(
        TypeError, match=r"`inject_hyperparams\(sgd\)`: `learning_rate` is a stateful schedule"
    ):
        gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=_LossDriven())
    tx = compat.inject_hyperparams(compat.sgd)(learning_rate=_LossDriven())  # optax's keeps its state
    state = tx.init(jnp.zeros(1))
    u, state = tx.update(jnp.ones(1), state, value=3.0)
    u, state = tx.update(jnp.ones(1), state, value=5.0)
    np.testing.assert_allclose(u, [-0.3], rtol=1e-6)  # the value after the first step's update
