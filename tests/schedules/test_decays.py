"""gradtx/schedules.py against float64 NumPy references written from spec/TF_SEMANTICS.md (no TF).

Also: the seeded noise of noisy_linear_cosine_decay, linear_warmup, jit without retracing,
and the XLA rewrites (`x / C -> x * (1/C)`, ...) that must not happen. The argument errors and
signatures are in test_decay_args.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import schedules

COUNTS = np.arange(41)
STAIRCASE = {"staircase": True}


# --------------------------------------------------------------------------- float64 references


def ref_exponential(c, lr, ds, rate, staircase=False):
    p = np.floor(c / ds) if staircase else c / ds
    return lr * rate**p


def ref_natural_exp(c, lr, ds, rate, staircase=False):
    p = np.floor(c / ds) if staircase else c / ds
    return lr * np.exp(-rate * p)


def ref_inverse_time(c, lr, ds, rate, staircase=False):
    p = np.floor(c / ds) if staircase else c / ds
    return lr / (1 + rate * p)


def ref_piecewise(c, boundaries, values):
    for b, v in zip(boundaries, values, strict=False):  # one value more than boundaries: the last
        if c <= b:
            return v
    return values[-1]


def ref_polynomial(c, lr, ds, end=0.0001, power=1.0, cycle=False):
    if cycle:
        ds = ds * (1 if c == 0 else math.ceil(c / ds))
    else:
        c = min(c, ds)
    return (lr - end) * (1 - c / ds) ** power + end


def ref_cosine(c, lr, ds, alpha=0.0):
    c = min(c, ds)
    return lr * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * c / ds)) + alpha)


def ref_cosine_restarts(c, lr, first, t_mul=2.0, m_mul=1.0, alpha=0.0):
    f = c / first
    if t_mul == 1.0:
        i = math.floor(f)
        f -= i
    else:  # the 1e-9 keeps float64 round-off from moving a restart by one step
        i = math.floor(math.log(1 - f * (1 - t_mul)) / math.log(t_mul) + 1e-9)
        f = (f - (1 - t_mul**i) / (1 - t_mul)) / t_mul**i
    return lr * ((1 - alpha) * 0.5 * m_mul**i * (1 + math.cos(math.pi * f)) + alpha)


def ref_linear_cosine(c, lr, ds, num_periods=0.5, alpha=0.0, beta=0.001):
    c = min(c, ds)
    linear = (ds - c) / ds
    cosine = 0.5 * (1 + math.cos(math.pi * 2 * num_periods * c / ds))
    return lr * ((alpha + linear) * cosine + beta)


CASES = [
    ("exponential", schedules.exponential_decay, ref_exponential, (0.1, 7, 0.9), {}),
    ("exponential_staircase", schedules.exponential_decay, ref_exponential, (0.1, 7, 0.5), STAIRCASE),
    ("natural_exp", schedules.natural_exp_decay, ref_natural_exp, (0.1, 7, 0.3), {}),
    ("natural_exp_staircase", schedules.natural_exp_decay, ref_natural_exp, (0.1, 7, 0.3), STAIRCASE),
    ("inverse_time", schedules.inverse_time_decay, ref_inverse_time, (0.1, 7, 0.5), {}),
    ("inverse_time_staircase", schedules.inverse_time_decay, ref_inverse_time, (0.1, 7, 0.5), STAIRCASE),
    ("polynomial", schedules.polynomial_decay, ref_polynomial, (0.1, 13), {}),
    ("polynomial_power", schedules.polynomial_decay, ref_polynomial, (0.1, 13, 0.01, 2.5), {}),
    ("polynomial_cycle", schedules.polynomial_decay, ref_polynomial, (0.1, 13, 0.01, 0.5), {"cycle": True}),
    ("cosine", schedules.cosine_decay, ref_cosine, (0.1, 23), {}),
    ("cosine_alpha", schedules.cosine_decay, ref_cosine, (0.1, 23, 0.2), {}),
    ("restarts", schedules.cosine_decay_restarts, ref_cosine_restarts, (0.1, 5), {}),
    ("restarts_flat", schedules.cosine_decay_restarts, ref_cosine_restarts, (0.1, 6, 1.0, 0.7, 0.1), {}),
    ("restarts_1.5", schedules.cosine_decay_restarts, ref_cosine_restarts, (0.1, 4, 1.5, 0.8, 0.2), {}),
    ("linear_cosine", schedules.linear_cosine_decay, ref_linear_cosine, (0.1, 23), {}),
    ("linear_cosine_args", schedules.linear_cosine_decay, ref_linear_cosine, (0.1, 23, 2.0, 0.1, 0.01), {}),
    (
        "noisy_without_noise",
        schedules.noisy_linear_cosine_decay,
        lambda c, lr, ds, iv, vd, *rest: ref_linear_cosine(c, lr, ds, *rest),
        (0.1, 23, 0.0, 0.55, 2.0, 0.1, 0.01),
        {},
    ),
    ("piecewise_int", schedules.piecewise_constant, ref_piecewise, ([5, 10, 20], [1.0, 0.5, 0.1, 0.01]), {}),
    (
        "piecewise_float",
        schedules.piecewise_constant,
        ref_piecewise,
        ([4.5, 10.0, 19.99], [1.0, 0.5, 0.1, 0.01]),
        {},
    ),
]


@pytest.mark.parametrize("name, factory, ref, args, kwargs", CASES, ids=[c[0] for c in CASES])
def test_schedule_matches_float64_reference(name, factory, ref, args, kwargs):
    schedule = factory(*args, **kwargs)
    expected = np.array([ref(int(c), *args, **kwargs) for c in COUNTS])
    actual = np.array([schedule(int(c)) for c in COUNTS])
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, expected, rtol=2e-6, atol=1e-8, err_msg=name)
    jitted = jax.jit(schedule)
    np.testing.assert_allclose([jitted(jnp.int32(c)) for c in COUNTS], expected, rtol=2e-6, atol=1e-8)


@pytest.mark.parametrize("name, factory, ref, args, kwargs", CASES, ids=[c[0] for c in CASES])
def test_schedule_returns_a_float32_scalar(name, factory, ref, args, kwargs):
    value = factory(*args, **kwargs)(3)
    assert value.shape == () and value.dtype == jnp.float32


def test_piecewise_constant_boundary_rule():
    lr = schedules.piecewise_constant([10, 20], [1.0, 0.5, 0.25])
    assert [float(lr(c)) for c in (-5, 10, 11, 20, 21, 10**6)] == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    floats = schedules.piecewise_constant((2.5, 3.0), (3, 2, 1))  # int values, float boundaries
    assert [float(floats(c)) for c in (2, 3, 4)] == [3.0, 2.0, 1.0]
    assert [float(floats(c)) for c in (2.5, 2.75, 3.0, 3.5)] == [3.0, 2.0, 2.0, 1.0]  # float counts
    assert float(schedules.piecewise_constant([], [0.25])(7)) == 0.25
    huge = schedules.piecewise_constant([2**40], [1.0, 2.0])  # beyond int32: never passed
    assert float(huge(2**31 - 1)) == 1.0


def test_piecewise_constant_accepts_arrays_and_jax_scalars():
    lr = schedules.piecewise_constant(np.array([1, 2]), [jnp.float32(0.5), 0.25, np.float32(0.125)])
    assert [float(lr(c)) for c in (1, 2, 3)] == [0.5, 0.25, 0.125]


def test_hyperparameters_may_be_jax_scalars_and_traced():
    plain = schedules.exponential_decay(0.1, 7, 0.9)
    scalars = schedules.exponential_decay(jnp.float32(0.1), jnp.int32(7), jnp.float32(0.9))
    traced = jax.jit(lambda lr, rate, c: schedules.natural_exp_decay(lr, 7, rate)(c))
    for c in (0, 5, 19):
        assert float(scalars(c)) == float(plain(c))
        expected = schedules.natural_exp_decay(0.1, 7, 0.3)(c)
        np.testing.assert_allclose(traced(0.1, 0.3, c), expected, rtol=1e-6)
    alpha = jnp.float32(0.2)
    expected = ref_cosine(5, 0.1, 23, 0.2)
    np.testing.assert_allclose(schedules.cosine_decay(0.1, 23, alpha)(5), expected, rtol=2e-6)


# --------------------------------------------------------------------------- XLA rewrites to prevent


def test_jit_keeps_exact_division_by_constant_decay_steps():
    # XLA rewrites x / 41.0 as x * (1/41.0), and 41 * (1/41.0) < 1 in float32.
    lr = schedules.exponential_decay(1.0, 41, 0.5, staircase=True)
    assert float(jax.jit(lr)(41)) == 0.5
    assert float(jax.jit(schedules.inverse_time_decay(1.0, 41, 1.0, staircase=True))(41)) == 0.5


def test_jit_polynomial_decay_reaches_end_without_nan():
    lr = schedules.polynomial_decay(1.0, 13, 0.0, 2.5)  # 1 - 13 * (1/13.0) < 0 would give NaN
    values = [float(jax.jit(lr)(c)) for c in (13, 14, 40)]
    assert values == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name, factory, ref, args, kwargs", CASES, ids=[c[0] for c in CASES])
def test_jit_agrees_with_eager_to_an_ulp_or_two(name, factory, ref, args, kwargs):
    schedule = factory(*args, **kwargs)
    eager = np.array([schedule(int(c)) for c in COUNTS])
    jitted = np.array([jax.jit(schedule)(jnp.int32(c)) for c in COUNTS])
    ulps = np.abs(eager.view(np.int32).astype(np.int64) - jitted.view(np.int32).astype(np.int64))
    assert ulps.max() <= 2, f"{name}: {ulps.max()} ulps at count {int(ulps.argmax())}"


# --------------------------------------------------------------------------- jit, retracing


@pytest.mark.parametrize("name, factory, ref, args, kwargs", CASES, ids=[c[0] for c in CASES])
def test_schedule_jits_without_retracing(name, factory, ref, args, kwargs):
    schedule = factory(*args, **kwargs)
    traces = []

    @jax.jit
    def f(count):
        traces.append(1)
        return schedule(count)

    for c in (0, 1, 17, 40):
        f(jnp.int32(c))
    assert len(traces) == 1
    for c in (0, 1, 17, 40):
        f(c)  # a Python int is a weakly typed int32: one more trace, then none
    assert len(traces) == 2


# --------------------------------------------------------------------------- noise


def _noise(schedule, counts, lr=1.0, ds=20, alpha=0.0, beta=0.0):
    """eps_c of a noisy_linear_cosine_decay with num_periods=0 (the cosine factor is then 1)."""
    values = np.asarray(jax.vmap(schedule)(jnp.asarray(counts, jnp.int32)), np.float64)
    linear = (ds - np.minimum(counts, ds)) / ds
    return values / lr - alpha - beta - linear


def test_noisy_linear_cosine_decay_is_reproducible_per_seed_and_count():
    a = schedules.noisy_linear_cosine_decay(0.1, 20, seed=3)
    b = schedules.noisy_linear_cosine_decay(0.1, 20, seed=3)
    c = schedules.noisy_linear_cosine_decay(0.1, 20, seed=4)
    va, vb, vc = ([float(s(k)) for k in range(10)] for s in (a, b, c))
    assert va == vb
    assert va == [float(a(k)) for k in range(10)]
    assert all(x != y for x, y in zip(va, vc, strict=True))
    assert float(jax.jit(a)(5)) == pytest.approx(va[5], rel=1e-6)
    assert len(set(va)) == 10  # fresh noise per count


def test_noisy_linear_cosine_decay_noise_variance_decays():
    iv, vd, ds = 2.0, 0.55, 20
    counts = np.arange(ds)
    samples = np.stack(
        [
            _noise(schedules.noisy_linear_cosine_decay(1.0, ds, iv, vd, 0.0, 0.0, 0.0, seed=s), counts)
            for s in range(400)
        ]
    )
    expected = iv / (1.0 + counts) ** vd
    np.testing.assert_allclose(samples.var(axis=0), expected, rtol=0.3)
    assert abs(samples.mean()) < 0.05
    # After decay_steps the step is clamped: one variance, independent draws per count.
    late = _noise(
        schedules.noisy_linear_cosine_decay(1.0, ds, iv, vd, num_periods=0.0, beta=0.0, seed=0),
        np.arange(ds, ds + 4000),
    )
    assert late.var() == pytest.approx(iv / (1.0 + ds) ** vd, rel=0.1)


def test_noisy_linear_cosine_decay_without_variance_is_linear_cosine_decay():
    noisy = schedules.noisy_linear_cosine_decay(0.1, 23, 0.0, 0.55, 2.0, 0.1, 0.01, seed=7)
    plain = schedules.linear_cosine_decay(0.1, 23, 2.0, 0.1, 0.01)
    assert [float(noisy(c)) for c in COUNTS] == [float(plain(c)) for c in COUNTS]


# --------------------------------------------------------------------------- linear_warmup


def test_linear_warmup_ramps_to_the_schedule_then_follows_it():
    base = schedules.exponential_decay(1.0, 10, 0.5)
    lr = schedules.linear_warmup(base, 8, init_value=0.2)
    target = ref_exponential(8, 1.0, 10, 0.5)
    expected = [0.2 + (target - 0.2) * c / 8 if c < 8 else ref_exponential(c, 1.0, 10, 0.5) for c in COUNTS]
    np.testing.assert_allclose([lr(int(c)) for c in COUNTS], expected, rtol=2e-6)
    np.testing.assert_allclose([jax.jit(lr)(jnp.int32(c)) for c in COUNTS], expected, rtol=2e-6)
    assert float(lr(8)) == float(base(8))  # continuous at the end of the warmup


def test_linear_warmup_of_a_constant_and_of_zero_steps():
    lr = schedules.linear_warmup(0.5, 4)
    assert [float(lr(c)) for c in range(6)] == [0.0, 0.125, 0.25, 0.375, 0.5, 0.5]
    base = schedules.cosine_decay(1.0, 10)
    no_warmup = schedules.linear_warmup(base, 0)
    assert [float(no_warmup(c)) for c in range(12)] == [float(base(c)) for c in range(12)]
    user = schedules.linear_warmup(lambda count: 1.0 / (count + 1), 2, init_value=1.0)
    np.testing.assert_allclose([user(c) for c in range(4)], [1.0, 2 / 3, 1 / 3, 1 / 4], rtol=1e-6)


def test_a_schedule_drives_an_optimizer_with_count_t_minus_1():
    lr = schedules.piecewise_constant([0, 1], [1.0, 0.5, 0.25])
    params, state = jnp.zeros(()), None
    tx = gradtx.sgd(lr)
    state = tx.init(params)
    steps = []
    for _ in range(4):
        updates, state = jax.jit(tx.update)(jnp.ones(()), state, params)
        steps.append(float(updates))
    assert steps == [-1.0, -0.5, -0.25, -0.25]
