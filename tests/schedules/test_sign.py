"""gradtx/schedules/_sign.py (AddSign/PowerSign sign decays) against float64 references of the spec.

The references are written from spec/TF_SEMANTICS.md ("Sign decays"), including restart's
clamp of the count to `decay_steps` before the modulo and the `zero_after` rules. Also:
jit with a traced count (no retrace), the XLA rewrite `x / C -> x * (1/C)` that must not
happen, float32 results, and every argument error.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradtx.schedules import cosine_sign_decay, linear_sign_decay, restart_sign_decay

COUNTS = range(41)

# --------------------------------------------------------------------------- float64 references


def ref_linear(c, ds):
    c = min(c, ds)
    return max(0.0, (ds - c) / ds)


def ref_cosine(c, ds, num_periods=0.5, zero_after=None):
    fraction = 2 * num_periods * min(c, ds) / ds
    if zero_after is not None and fraction >= 2 * zero_after:
        return 0.0
    return 0.5 * (1 + math.cos(math.pi * fraction))


def ref_restart(c, ds, num_periods=1, zero_after=None):
    c = min(c, ds)  # clamped BEFORE the modulo
    periods = num_periods * c
    if zero_after is not None and periods / ds >= zero_after:
        return 0.0
    return 0.5 * (1 + math.cos(math.pi * (periods % ds) / ds))


# (id, factory, reference, args); the boundaries of zero_after fall on exact binary fractions
CASES = [
    ("linear-7", linear_sign_decay, ref_linear, (7,)),
    ("linear-41", linear_sign_decay, ref_linear, (41,)),
    ("linear-1", linear_sign_decay, ref_linear, (1,)),
    ("cosine-23", cosine_sign_decay, ref_cosine, (23,)),
    ("cosine-periods", cosine_sign_decay, ref_cosine, (13, 1.7)),
    ("cosine-zero-after", cosine_sign_decay, ref_cosine, (8, 1.0, 0.75)),
    ("cosine-zero-after-int", cosine_sign_decay, ref_cosine, (30, 2, 1)),
    ("cosine-zero-after-0", cosine_sign_decay, ref_cosine, (10, 0.5, 0)),
    ("restart-9", restart_sign_decay, ref_restart, (9,)),
    ("restart-int-periods", restart_sign_decay, ref_restart, (13, 3)),
    ("restart-float-periods", restart_sign_decay, ref_restart, (10, 2.5)),
    ("restart-fraction-period", restart_sign_decay, ref_restart, (41, 0.3)),
    ("restart-zero-after", restart_sign_decay, ref_restart, (16, 4, 2)),
    ("restart-zero-after-late", restart_sign_decay, ref_restart, (8, 2, 2)),
    ("restart-zero-after-never", restart_sign_decay, ref_restart, (8, 2, 3)),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, factory, ref, args", CASES, ids=IDS)
def test_sign_decay_matches_float64_reference(name, factory, ref, args):
    schedule = factory(*args)
    expected = np.array([ref(c, *args) for c in COUNTS])
    eager = np.array([schedule(c) for c in COUNTS])
    assert eager.dtype == np.float32
    np.testing.assert_allclose(eager, expected, rtol=2e-6, atol=1e-7, err_msg=name)
    jitted = jax.jit(schedule)
    traced = np.array([jitted(jnp.int32(c)) for c in COUNTS])
    np.testing.assert_allclose(traced, expected, rtol=2e-6, atol=1e-7, err_msg=f"{name} (jit)")
    # a batch of counts goes through XLA's vectorized cos: an ulp or two more where 1 + cos cancels
    batched = np.asarray(jax.jit(jax.vmap(schedule))(jnp.arange(41, dtype=jnp.int32)))
    np.testing.assert_allclose(batched, expected, rtol=2e-6, atol=5e-7, err_msg=f"{name} (vmap)")


@pytest.mark.parametrize("name, factory, ref, args", CASES, ids=IDS)
def test_sign_decay_returns_a_float32_scalar_even_under_x64(name, factory, ref, args):
    value = factory(*args)(3)
    assert value.shape == () and value.dtype == jnp.float32
    with jax.enable_x64(True):
        values = [factory(*args)(c) for c in (3, 17)]
        assert all(v.dtype == jnp.float32 for v in values)
    assert [float(v) for v in values] == [float(factory(*args)(c)) for c in (3, 17)]


def test_linear_sign_decay_values():
    assert [float(linear_sign_decay(4)(c)) for c in range(7)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0]
    assert float(linear_sign_decay(4)(2**31 - 1)) == 0.0  # the count is clamped before the int32 difference


def test_cosine_sign_decay_default_falls_from_one_to_zero_and_stays():
    decay = cosine_sign_decay(10)
    assert float(decay(0)) == 1.0
    assert float(decay(5)) == pytest.approx(0.5, abs=1e-7)
    assert [float(decay(c)) for c in (10, 11, 1000)] == [0.0, 0.0, 0.0]


def test_cosine_sign_decay_zero_after_compares_the_fraction_with_twice_zero_after():
    decay = cosine_sign_decay(8, num_periods=1.0, zero_after=0.75)  # fraction = c / 4 >= 1.5 from c = 6
    assert float(decay(5)) > 0.1
    assert [float(decay(c)) for c in (6, 7, 8, 100)] == [0.0, 0.0, 0.0, 0.0]
    without = cosine_sign_decay(8, num_periods=1.0)
    assert float(without(7)) > 0.8 and float(without(8)) == 1.0  # a full period ends at 1


def test_restart_sign_decay_clamps_the_count_before_the_modulo():
    """At count >= decay_steps an integer num_periods gives mod 0: the decay is 1, not 0."""
    for periods in (1, 2, 3):
        decay = restart_sign_decay(10, num_periods=periods)
        assert [float(decay(c)) for c in (10, 11, 25, 10**6)] == [1.0] * 4
    decay = restart_sign_decay(10, num_periods=1)
    assert float(decay(9)) < 0.03  # just before the end of the period
    # a fractional num_periods freezes at the value of count = decay_steps
    frac = restart_sign_decay(10, num_periods=0.25)
    assert float(frac(10)) == float(frac(11)) == float(frac(500)) == pytest.approx(ref_restart(10, 10, 0.25))
    assert float(frac(10)) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)), rel=1e-6)


def test_restart_sign_decay_zero_after():
    decay = restart_sign_decay(16, num_periods=4, zero_after=2)  # n c / d >= 2 from c = 8
    assert float(decay(7)) > 0.1
    assert [float(decay(c)) for c in (8, 9, 16, 17, 1000)] == [0.0] * 5
    late = restart_sign_decay(8, num_periods=2, zero_after=3)  # n c / d <= 2 < 3: never zero, back to 1
    assert [float(late(c)) for c in (8, 9, 1000)] == [1.0, 1.0, 1.0]


def test_jit_keeps_exact_division_by_constant_decay_steps():
    # XLA rewrites x / 41.0 as x * (1/41.0), and 41 * (1/41.0) < 1 in float32.
    assert float(jax.jit(linear_sign_decay(41))(jnp.int32(0))) == 1.0
    assert float(jax.jit(restart_sign_decay(41, 1, zero_after=1))(jnp.int32(41))) == 0.0
    assert float(jax.jit(cosine_sign_decay(41, 0.5, zero_after=0.5))(jnp.int32(41))) == 0.0


@pytest.mark.parametrize("name, factory, ref, args", CASES, ids=IDS)
def test_jit_equals_eager_bit_for_bit(name, factory, ref, args):
    schedule = factory(*args)
    eager = np.array([schedule(c) for c in COUNTS], np.float32)
    jitted = np.array([jax.jit(schedule)(jnp.int32(c)) for c in COUNTS], np.float32)
    np.testing.assert_array_equal(jitted, eager)


@pytest.mark.parametrize("name, factory, ref, args", CASES, ids=IDS)
def test_sign_decay_jits_without_retracing(name, factory, ref, args):
    schedule = factory(*args)
    traces = []

    @jax.jit
    def f(count):
        traces.append(1)
        return schedule(count)

    for c in (0, 1, 17, 40):
        f(jnp.int32(c))
    assert len(traces) == 1


def test_numpy_and_python_integer_arguments_agree():
    assert float(linear_sign_decay(np.int64(8))(3)) == float(linear_sign_decay(8)(3)) == 0.625
    assert float(cosine_sign_decay(8, np.float32(1.0))(2)) == float(cosine_sign_decay(8, 1.0)(2))
    assert float(restart_sign_decay(8, jnp.float32(2.0))(3)) == float(restart_sign_decay(8, 2)(3))


# --------------------------------------------------------------------------- errors

INF, NAN = float("inf"), float("nan")

VALUE_ERRORS = [
    (linear_sign_decay, (0,), r"`linear_sign_decay`: `decay_steps` must be > 0, got 0\."),
    (linear_sign_decay, (-3,), r"`linear_sign_decay`: `decay_steps` must be > 0, got -3\."),
    (cosine_sign_decay, (0,), r"`cosine_sign_decay`: `decay_steps` must be > 0, got 0\."),
    (cosine_sign_decay, (10, 0.0), r"`cosine_sign_decay`: `num_periods` must be > 0, got 0.0\."),
    (cosine_sign_decay, (10, -1), r"`cosine_sign_decay`: `num_periods` must be > 0, got -1\."),
    (cosine_sign_decay, (10, INF), r"`cosine_sign_decay`: `num_periods` must be finite, got inf\."),
    (cosine_sign_decay, (10, 0.5, -0.5), r"`cosine_sign_decay`: `zero_after` must be >= 0, got -0.5\."),
    (cosine_sign_decay, (10, 0.5, NAN), r"`cosine_sign_decay`: `zero_after` must be finite, got nan\."),
    (restart_sign_decay, (-1,), r"`restart_sign_decay`: `decay_steps` must be > 0, got -1\."),
    (restart_sign_decay, (10, 0), r"`restart_sign_decay`: `num_periods` must be > 0, got 0\."),
    (restart_sign_decay, (10, 1, -1), r"`restart_sign_decay`: `zero_after` must be >= 0, got -1\."),
]

TYPE_ERRORS = [
    (
        linear_sign_decay,
        (5.0,),
        r"`linear_sign_decay`: `decay_steps` must be an integer, got 5.0 of type float\.",
    ),
    (
        linear_sign_decay,
        (True,),
        r"`linear_sign_decay`: `decay_steps` must be an integer, got True of type bool\.",
    ),
    (linear_sign_decay, ("10",), r"`linear_sign_decay`: `decay_steps` must be an integer, got '10'"),
    (cosine_sign_decay, (10.5,), r"`cosine_sign_decay`: `decay_steps` must be an integer"),
    (cosine_sign_decay, (10, "1"), r"`cosine_sign_decay`: `num_periods` must be a number or a scalar array"),
    (
        cosine_sign_decay,
        (10, 0.5, "1"),
        r"`cosine_sign_decay`: `zero_after` must be a number or a scalar array",
    ),
    (
        cosine_sign_decay,
        (10, lambda c: 0.5),
        r"`num_periods` must be a number or a scalar array \(not a schedule",
    ),
    (restart_sign_decay, (None,), r"`restart_sign_decay`: `decay_steps` must be an integer, got None"),
    (
        restart_sign_decay,
        (10, None),
        r"`restart_sign_decay`: `num_periods` must be a number or a scalar array",
    ),
    (
        restart_sign_decay,
        (10, 1, True),
        r"`restart_sign_decay`: `zero_after` must be a number or a scalar array",
    ),
    (restart_sign_decay, (10, jnp.ones(2)), r"`restart_sign_decay`: `num_periods` must be a scalar"),
]


@pytest.mark.parametrize("factory, args, match", VALUE_ERRORS)
def test_value_errors(factory, args, match):
    with pytest.raises(ValueError, match=match):
        factory(*args)


@pytest.mark.parametrize("factory, args, match", TYPE_ERRORS)
def test_type_errors(factory, args, match):
    with pytest.raises(TypeError, match=match):
        factory(*args)
