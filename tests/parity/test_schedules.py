"""gradtx.schedules against TF's own `tf.compat.v1.train.*_decay`, evaluated eagerly at global steps 0..40.

In eager mode TF returns a callable (`functools.partial(schedule, global_step)`); calling
it gives the float32 value. gradtx evaluated eagerly equals TF bit for bit; under `jit`
XLA's FMA fusion may move the last bit or two (checked at rtol 1e-6, atol 1e-7).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

from gradtx import schedules

v1 = tf.compat.v1.train
STEPS = range(41)
STAIRCASE, CYCLE = {"staircase": True}, {"cycle": True}

# (id, gradtx factory, TF function, positional args after global_step, keyword args)
CASES = [
    ("exponential", schedules.exponential_decay, v1.exponential_decay, (0.1, 7, 0.9), {}),
    ("exponential_staircase", schedules.exponential_decay, v1.exponential_decay, (0.1, 7, 0.9), STAIRCASE),
    ("exponential_odd", schedules.exponential_decay, v1.exponential_decay, (0.37, 3, 0.37), {}),
    ("exponential_41", schedules.exponential_decay, v1.exponential_decay, (1.0, 41, 0.5), STAIRCASE),
    ("natural_exp", schedules.natural_exp_decay, v1.natural_exp_decay, (0.1, 7, 0.3), {}),
    ("natural_exp_staircase", schedules.natural_exp_decay, v1.natural_exp_decay, (0.1, 7, 0.3), STAIRCASE),
    ("natural_exp_large", schedules.natural_exp_decay, v1.natural_exp_decay, (0.5, 3, 2.5), {}),
    ("inverse_time", schedules.inverse_time_decay, v1.inverse_time_decay, (0.1, 7, 0.3), {}),
    ("inverse_time_staircase", schedules.inverse_time_decay, v1.inverse_time_decay, (0.1, 7, 0.3), STAIRCASE),
    ("polynomial", schedules.polynomial_decay, v1.polynomial_decay, (0.1, 13), {}),
    ("polynomial_power", schedules.polynomial_decay, v1.polynomial_decay, (0.1, 13, 0.003, 2.5), {}),
    ("polynomial_cycle", schedules.polynomial_decay, v1.polynomial_decay, (0.1, 13, 0.003, 0.7), CYCLE),
    ("polynomial_cycle_power", schedules.polynomial_decay, v1.polynomial_decay, (0.1, 6, 0.0, 3.0), CYCLE),
    ("cosine", schedules.cosine_decay, v1.cosine_decay, (0.1, 23), {}),
    ("cosine_alpha", schedules.cosine_decay, v1.cosine_decay, (0.1, 23, 0.3), {}),
    ("restarts", schedules.cosine_decay_restarts, v1.cosine_decay_restarts, (0.1, 5), {}),
    ("restarts_t1", schedules.cosine_decay_restarts, v1.cosine_decay_restarts, (0.1, 6, 1.0, 0.7, 0.1), {}),
    ("restarts_t1.5", schedules.cosine_decay_restarts, v1.cosine_decay_restarts, (0.1, 4, 1.5, 0.8, 0.2), {}),
    ("restarts_t3", schedules.cosine_decay_restarts, v1.cosine_decay_restarts, (0.1, 2, 3.0, 0.5), {}),
    ("linear_cosine", schedules.linear_cosine_decay, v1.linear_cosine_decay, (0.1, 23), {}),
    (
        "linear_cosine_args",
        schedules.linear_cosine_decay,
        v1.linear_cosine_decay,
        (0.1, 23, 2.0, 0.1, 0.01),
        {},
    ),
    (
        "noisy_without_noise",
        schedules.noisy_linear_cosine_decay,
        v1.noisy_linear_cosine_decay,
        (0.1, 23, 0.0, 0.55, 2.0, 0.1, 0.01),
        {},
    ),
]
IDS = [c[0] for c in CASES]


def _tf_values(tf_fn, args, kwargs, steps=STEPS):
    lr, rest = args[0], args[1:]
    return np.array([np.float32(tf_fn(lr, tf.constant(s), *rest, **kwargs)()) for s in steps], np.float32)


def _ulps(a, b):
    return int(np.max(np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))))


@pytest.mark.parametrize("name, factory, tf_fn, args, kwargs", CASES, ids=IDS)
def test_eager_schedule_equals_tf_bit_for_bit(name, factory, tf_fn, args, kwargs):
    expected = _tf_values(tf_fn, args, kwargs)
    schedule = factory(*args, **kwargs)
    actual = np.array([schedule(s) for s in STEPS], np.float32)
    assert _ulps(actual, expected) == 0, f"{name}: {_ulps(actual, expected)} ulps"


@pytest.mark.parametrize("name, factory, tf_fn, args, kwargs", CASES, ids=IDS)
def test_jitted_schedule_with_traced_count_matches_tf(name, factory, tf_fn, args, kwargs):
    expected = _tf_values(tf_fn, args, kwargs)
    jitted = jax.jit(factory(*args, **kwargs))
    actual = np.array([jitted(jnp.int32(s)) for s in STEPS], np.float32)
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-7, err_msg=name)


def test_jax_scalar_hyperparameters_match_tf():
    expected = _tf_values(v1.cosine_decay_restarts, (0.1, 4, 1.5, 0.8, 0.2), {})
    f32 = jnp.float32
    schedule = schedules.cosine_decay_restarts(f32(0.1), jnp.int32(4), f32(1.5), f32(0.8), f32(0.2))
    np.testing.assert_array_equal([schedule(s) for s in STEPS], expected)


@pytest.mark.parametrize(
    "boundaries, values, float_steps",
    [
        ([5, 10, 20], [1.0, 0.5, 0.1, 0.01], False),
        ([0, 1], [0.3, 0.2, 0.1], False),
        ([4.5, 10.0, 19.99], [1.0, 0.5, 0.1, 0.01], True),  # TF wants float boundaries with a float step
    ],
)
def test_piecewise_constant_matches_tf(boundaries, values, float_steps):
    steps = [tf.constant(float(s) if float_steps else s) for s in STEPS]
    expected = np.array([np.float32(v1.piecewise_constant(s, boundaries, values)()) for s in steps])
    schedule = schedules.piecewise_constant(boundaries, values)
    np.testing.assert_array_equal([schedule(s) for s in STEPS], expected)
    np.testing.assert_array_equal([jax.jit(schedule)(jnp.int32(s)) for s in STEPS], expected)
    np.testing.assert_array_equal([schedule(float(s)) for s in STEPS], expected)  # float counts too


def test_piecewise_constant_length_error_carries_tf_message():
    message = "he length of boundaries should be 1 less than the length of values"  # T/t
    with pytest.raises(ValueError, match=message):
        v1.piecewise_constant(tf.constant(0), [1, 2], [1.0, 0.5])
    with pytest.raises(ValueError, match=message):
        schedules.piecewise_constant([1, 2], [1.0, 0.5])


def test_noisy_linear_cosine_decay_noise_has_tf_scale():
    """TF's noise is not reproducible: compare the spread around the noise-free value at one step."""
    tf.random.set_seed(0)
    args, step, draws = (1.0, 20, 0.5, 0.55, 0.0, 0.0, 0.0), 3, 300
    tf_draws = np.array(
        [
            np.float32(v1.noisy_linear_cosine_decay(args[0], tf.constant(step), *args[1:])())
            for _ in range(draws)
        ]
    )
    ours = np.array([schedules.noisy_linear_cosine_decay(*args, seed=s)(step) for s in range(draws)])
    clean = float(schedules.noisy_linear_cosine_decay(1.0, 20, 0.0, 0.55, 0.0, 0.0, 0.0)(step))
    assert tf_draws.mean() == pytest.approx(clean, abs=0.15)
    assert ours.mean() == pytest.approx(clean, abs=0.15)
    assert ours.std() == pytest.approx(tf_draws.std(), rel=0.25)
