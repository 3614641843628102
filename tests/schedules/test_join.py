"""gradtx/schedules/_join.py: join_schedules and piecewise_interpolate against optax's, and their errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gradtx import schedules as S

COUNTS = jnp.arange(60, dtype=jnp.int32)


def values(schedule, counts=COUNTS):
    """A schedule at every count, in one compiled call."""
    out = jax.jit(jax.vmap(schedule))(counts)
    assert out.dtype == jnp.float32 and out.shape == counts.shape
    return np.asarray(out)


def test_join_schedules_matches_optax():
    ours = S.join_schedules([S.linear_warmup(1.0, 5), S.polynomial_decay(1.0, 10, 0.1), 0.3], [5, 25])
    theirs = optax.join_schedules(
        [
            optax.linear_schedule(0.0, 1.0, 5),
            optax.linear_schedule(1.0, 0.1, 10),
            optax.constant_schedule(0.3),
        ],
        [5, 25],
    )
    np.testing.assert_allclose(values(ours), values(theirs), rtol=1e-6, atol=1e-7)


def test_join_schedules_restarts_each_piece_at_zero_and_takes_python_ints():
    lr = S.join_schedules(
        [lambda c: c, lambda c: 100 + c, lambda c: 1000 + c], [3, 3]
    )  # an empty middle piece
    assert [float(lr(c)) for c in (0, 2, 3, 4)] == [0.0, 2.0, 1000.0, 1001.0]
    assert float(S.join_schedules([0.5], [])(7)) == 0.5


@pytest.mark.parametrize("kind", ["linear", "cosine"])
@pytest.mark.parametrize(
    "init_value, boundaries_and_scales",
    [(0.7, {3: 0.1, 10: 5.0, 30: 0.5}), (2.0, {0: 0.5, 1: 2.0, 59: 0.0}), (1.0, None)],
    ids=["spread", "tight", "constant"],
)
def test_piecewise_interpolate_matches_optax(kind, init_value, boundaries_and_scales):
    ours = S.piecewise_interpolate(kind, init_value, boundaries_and_scales)
    theirs = optax.piecewise_interpolate_schedule(kind, init_value, boundaries_and_scales)
    np.testing.assert_allclose(values(ours), values(theirs), rtol=1e-6, atol=1e-7)


def test_piecewise_interpolate_reaches_each_accumulated_value_at_its_boundary():
    lr = S.piecewise_interpolate("cosine", 1.0, {10: 0.5, 20: 0.1})
    assert [round(float(lr(c)), 6) for c in (0, 5, 10, 15, 20, 99)] == [1.0, 0.75, 0.5, 0.275, 0.05, 0.05]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: S.join_schedules([], []),
            TypeError,
            r"`join_schedules`: `schedules` must be a non-empty list",
        ),
        (
            lambda: S.join_schedules(["a", 0.1], [3]),
            TypeError,
            r"`schedules\[0\]` must be a number or a scalar",
        ),
        (
            lambda: S.join_schedules([0.1, 0.2], [3.5]),
            TypeError,
            r"`boundaries\[0\]` must be an integer, got 3.5",
        ),
        (lambda: S.join_schedules([0.1, 0.2], 3), TypeError, r"`boundaries` must be a list of ints, got 3\."),
        (lambda: S.join_schedules([0.1, 0.2], [-1]), ValueError, r"`boundaries\[0\]` must be >= 0, got -1\."),
        (
            lambda: S.join_schedules([0.1, 0.2], [3, 5]),
            ValueError,
            r"`join_schedules`: `boundaries` must have one element fewer than `schedules`, got 2 boundaries "
            r"and 2",
        ),
        (
            lambda: S.join_schedules([0.1, 0.2, 0.3], [5, 3]),
            ValueError,
            r"`boundaries` must not decrease, got \[5, 3\]",
        ),
        (lambda: S.join_schedules([float("nan"), 0.2], [3]), ValueError, r"`schedules\[0\]` must be finite"),
        (
            lambda: S.piecewise_interpolate("quadratic", 1.0),
            ValueError,
            r"`piecewise_interpolate`: `interpolate_type` must be one of 'linear', 'cosine'; got 'quadratic'",
        ),
        (lambda: S.piecewise_interpolate("linear", -1.0), ValueError, r"`init_value` must be >= 0, got -1.0"),
        (
            lambda: S.piecewise_interpolate("linear", 1.0, {5: -0.5}),
            ValueError,
            r"`boundaries_and_scales\[5\]` must be >= 0",
        ),
        (
            lambda: S.piecewise_interpolate("linear", 1.0, {5.5: 0.5}),
            TypeError,
            r"must be ints >= 0, got 5.5",
        ),
        (lambda: S.piecewise_interpolate("linear", 1.0, {-2: 0.5}), ValueError, r"must be ints >= 0, got -2"),
        (
            lambda: S.piecewise_interpolate("linear", 1.0, [(5, 0.5)]),
            TypeError,
            r"must be a dict \{step: scale\}",
        ),
    ],
    ids=lambda x: None,
)
def test_bad_arguments_are_refused_at_construction(call, error, match):
    with pytest.raises(error, match=match):
        call()
