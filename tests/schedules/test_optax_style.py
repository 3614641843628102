"""gradtx/schedules/_optax_style.py and exponential_decay's optax options, against optax's schedules."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gradtx import schedules as S

COUNTS = jnp.arange(90, dtype=jnp.int32)
SGDR_CYCLES = [
    {"init_value": 0.0, "peak_value": 1.0, "warmup_steps": 3, "decay_steps": 12},
    {
        "init_value": 0.1,
        "peak_value": 0.5,
        "warmup_steps": 2,
        "decay_steps": 20,
        "end_value": 0.01,
        "exponent": 2.0,
    },
    {"init_value": 0.0, "peak_value": 0.2, "warmup_steps": 0, "decay_steps": 10},
]

# (id, gradtx schedule, optax schedule)
CASES = [
    (
        "warmup_cosine",
        S.warmup_cosine_decay(0.01, 1.0, 7, 40, end_value=0.05, exponent=1.5),
        optax.warmup_cosine_decay_schedule(0.01, 1.0, 7, 40, 0.05, 1.5),
    ),
    (
        "warmup_cosine_no_warmup",
        S.warmup_cosine_decay(0.3, 1.0, 0, 40),
        optax.warmup_cosine_decay_schedule(0.3, 1.0, 0, 40),
    ),
    (
        "warmup_cosine_zero_peak",
        S.warmup_cosine_decay(0.1, 0.0, 5, 20),
        optax.warmup_cosine_decay_schedule(0.1, 0.0, 5, 20),
    ),
    (
        "warmup_exponential",
        S.warmup_exponential_decay(0.0, 0.5, 6, 4, 0.8, transition_begin=3, staircase=True, end_value=0.1),
        optax.warmup_exponential_decay_schedule(0.0, 0.5, 6, 4, 0.8, 3, True, 0.1),
    ),
    (
        "warmup_exponential_growth",
        S.warmup_exponential_decay(0.0, 0.5, 6, 7, 1.1, end_value=1.0),
        optax.warmup_exponential_decay_schedule(0.0, 0.5, 6, 7, 1.1, end_value=1.0),
    ),
    (
        "exponential_begin_end",
        S.exponential_decay(0.5, 7, 0.7, transition_begin=5, end_value=0.2),
        optax.exponential_decay(0.5, 7, 0.7, 5, False, 0.2),
    ),
    (
        "exponential_staircase_upper",
        S.exponential_decay(0.5, 7, 1.2, staircase=True, transition_begin=2, end_value=1.5),
        optax.exponential_decay(0.5, 7, 1.2, 2, True, 1.5),
    ),
    ("exponential_tf_defaults", S.exponential_decay(0.5, 7, 0.7), optax.exponential_decay(0.5, 7, 0.7)),
    (
        "cosine_onecycle",
        S.cosine_onecycle(50, 2.0, 0.25, 10.0, 100.0),
        optax.cosine_onecycle_schedule(50, 2.0, 0.25, 10.0, 100.0),
    ),
    ("cosine_onecycle_defaults", S.cosine_onecycle(80, 0.1), optax.cosine_onecycle_schedule(80, 0.1)),
    (
        "linear_onecycle",
        S.linear_onecycle(50, 2.0, 0.25, 0.7, 10.0, 100.0),
        optax.linear_onecycle_schedule(50, 2.0, 0.25, 0.7, 10.0, 100.0),
    ),
    ("linear_onecycle_defaults", S.linear_onecycle(80, 0.1), optax.linear_onecycle_schedule(80, 0.1)),
    ("sgdr", S.sgdr(SGDR_CYCLES), optax.sgdr_schedule(SGDR_CYCLES)),
]


@pytest.mark.parametrize("name, ours, theirs", CASES, ids=[c[0] for c in CASES])
def test_matches_optax(name, ours, theirs):
    actual, expected = jax.jit(lambda c: (jax.vmap(ours)(c), jax.vmap(theirs)(c)))(COUNTS)  # one compilation
    assert actual.dtype == jnp.float32
    # atol: an ulp of the peak (2.0), where a cosine ends in cancellation
    np.testing.assert_allclose(actual, expected, rtol=2e-6, atol=3e-7, err_msg=name)
    eager = [ours(int(c)) for c in (0, 7, 41)]  # Python ints, no jit
    np.testing.assert_allclose(eager, np.asarray(actual)[[0, 7, 41]], rtol=2e-6, atol=3e-7)


def test_exponential_decay_defaults_are_tfs_arithmetic_unchanged():
    """transition_begin=0 and no end_value give TF's schedule (its parity: tests/parity/test_schedules.py)."""
    plain = S.exponential_decay(0.37, 3, 0.37)
    explicit = S.exponential_decay(0.37, 3, 0.37, transition_begin=0, end_value=None)
    for c in range(0, 40, 3):
        assert (
            float(plain(c))
            == float(explicit(c))
            == float(np.float32(0.37) * np.float32(0.37) ** np.float32(c / 3))
        )


def test_exponential_decay_holds_until_transition_begin_and_stops_at_end_value():
    lr = S.exponential_decay(1.0, 1, 0.5, transition_begin=10, end_value=0.125)
    assert [float(lr(c)) for c in (0, 9, 10, 11, 12, 13, 14, 10**6)] == [
        1.0,
        1.0,
        1.0,
        0.5,
        0.25,
        0.125,
        0.125,
        0.125,
    ]
    big = jnp.int32(2**31 - 1)  # the count is shifted as an int, before the float32 cast
    assert float(
        jax.jit(S.exponential_decay(1.0, 1, 0.5, transition_begin=5, end_value=0.1))(big)
    ) == pytest.approx(0.1)


def test_sgdr_restarts_every_cycle():
    lr = S.sgdr(SGDR_CYCLES)
    assert [float(lr(c)) for c in (0, 3, 12, 14, 32)] == pytest.approx([0.0, 1.0, 0.1, 0.5, 0.2])


CYCLE = {"init_value": 0.0, "peak_value": 1.0, "warmup_steps": 2, "decay_steps": 5}
VALUE_ERRORS = [
    (
        lambda: S.warmup_cosine_decay(0.0, 1.0, 5, 5),
        r"`warmup_cosine_decay`: `decay_steps` must be > `warmup_steps` \(it ",
    ),
    (
        lambda: S.warmup_cosine_decay(0.0, -1.0, 1, 5),
        r"`warmup_cosine_decay`: `peak_value` must be >= 0, got -1.0\.",
    ),
    (
        lambda: S.warmup_cosine_decay(0.0, 1.0, -1, 5),
        r"`warmup_cosine_decay`: `warmup_steps` must be >= 0, got -1\.",
    ),
    (lambda: S.warmup_cosine_decay(0.0, 1.0, 1, 5, exponent=0.0), r"`exponent` must be > 0, got 0.0\."),
    (lambda: S.warmup_cosine_decay(0.0, 1.0, 1, 5, end_value=float("inf")), r"`end_value` must be finite"),
    (
        lambda: S.warmup_exponential_decay(0.0, 1.0, 2, 0, 0.5),
        r"`warmup_exponential_decay`: `transition_steps` must be > 0, got 0\.",
    ),
    (
        lambda: S.warmup_exponential_decay(-0.5, 1.0, 2, 3, 0.5),
        r"`warmup_exponential_decay`: `init_value` must be >= 0",
    ),
    (
        lambda: S.warmup_exponential_decay(0.0, 1.0, 2, 3, 0.5, transition_begin=-1),
        r"`transition_begin` must be >= 0",
    ),
    (
        lambda: S.exponential_decay(0.1, 3, 0.5, transition_begin=-2),
        r"`exponential_decay`: `transition_begin` must be >= 0",
    ),
    (
        lambda: S.exponential_decay(0.1, 3, 0.5, end_value=-0.1),
        r"`exponential_decay`: `end_value` must be >= 0, got -0.1",
    ),
    (lambda: S.cosine_onecycle(0, 1.0), r"`cosine_onecycle`: `transition_steps` must be >= 1, got 0\."),
    (
        lambda: S.cosine_onecycle(10, 1.0, pct_start=1.5),
        r"`cosine_onecycle`: `pct_start` must be in \[0.0, 1.0\], got 1.5",
    ),
    (
        lambda: S.cosine_onecycle(10, 1.0, div_factor=0.0),
        r"`cosine_onecycle`: `div_factor` must be > 0, got 0.0",
    ),
    (
        lambda: S.linear_onecycle(10, 1.0, final_div_factor=-1.0),
        r"`linear_onecycle`: `final_div_factor` must be > 0",
    ),
    (
        lambda: S.linear_onecycle(10, 1.0, 0.5, 0.4),
        r"`linear_onecycle`: `pct_final` must be >= `pct_start`, got pct_final=0.4",
    ),
    (
        lambda: S.sgdr([{**CYCLE, "decay_steps": 2}]),
        r"`sgdr`: `cosine_kwargs\[0\]`: `decay_steps` must be > `warmup_steps`",
    ),
    (
        lambda: S.sgdr([CYCLE, {**CYCLE, "peak_value": -1.0}]),
        r"`sgdr`: `cosine_kwargs\[1\]`: `peak_value` must be >= 0",
    ),
]
TYPE_ERRORS = [
    (
        lambda: S.warmup_cosine_decay(0.0, 1.0, 2.0, 5),
        r"`warmup_cosine_decay`: `warmup_steps` must be an integer, got 2.0",
    ),
    (lambda: S.warmup_cosine_decay(0.0, "1", 2, 5), r"`warmup_cosine_decay`: `peak_value` must be a number"),
    (
        lambda: S.warmup_exponential_decay(0.0, 1.0, 2, 3, 0.5, staircase=None),
        r"`staircase` must be True or False",
    ),
    (
        lambda: S.exponential_decay(0.1, 3, 0.5, transition_begin=1.5),
        r"`transition_begin` must be an integer, got 1.5",
    ),
    (
        lambda: S.exponential_decay(0.1, 3, 0.5, end_value=lambda c: 0.1),
        r"`end_value` must be a number or a scalar array",
    ),
    (
        lambda: S.cosine_onecycle(10.0, 1.0),
        r"`cosine_onecycle`: `transition_steps` must be an integer, got 10.0",
    ),
    (lambda: S.linear_onecycle(10, 1.0, pct_final="0.9"), r"`linear_onecycle`: `pct_final` must be a number"),
    (lambda: S.sgdr([]), r"`sgdr`: `cosine_kwargs` must be a non-empty list of dicts"),
    (
        lambda: S.sgdr([CYCLE, 3]),
        r"`sgdr`: `cosine_kwargs\[1\]` must be a dict of `warmup_cosine_decay` arguments",
    ),
    (
        lambda: S.sgdr([{**CYCLE, "peak": 1.0}]),
        r"`sgdr`: `cosine_kwargs\[0\]` has unknown keys \['peak'\]; `warmup_cosine_decay` takes "
        r"\['init_value'",
    ),
    (
        lambda: S.sgdr([{"init_value": 0.0}]),
        r"`cosine_kwargs\[0\]` has no \['decay_steps', 'peak_value', 'warmup_steps'\]",
    ),
]


@pytest.mark.parametrize(
    "call, match", VALUE_ERRORS, ids=[m.split("`")[1] + str(i) for i, (_, m) in enumerate(VALUE_ERRORS)]
)
def test_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "call, match", TYPE_ERRORS, ids=[m.split("`")[1] + str(i) for i, (_, m) in enumerate(TYPE_ERRORS)]
)
def test_type_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()
