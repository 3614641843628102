"""gradtx/schedules: every argument error of TF's decays (value and type, with the message naming
the schedule, the argument and the value), TF's argument order, and a complete, sorted `__all__`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from gradtx import schedules

S = schedules
INF, NAN = float("inf"), float("nan")

# (factory, args, kwargs, the message after "`<factory name>`: ")
VALUE_ERRORS = [
    (S.exponential_decay, (0.1, 0, 0.5), {}, r"`decay_steps` must be > 0, got 0\."),
    (S.exponential_decay, (0.1, -3, 0.5), {}, r"`decay_steps` must be > 0, got -3\."),
    (S.exponential_decay, (-0.1, 10, 0.5), {}, r"`learning_rate` must be >= 0, got -0.1\."),
    (S.exponential_decay, (0.1, 10, -0.5), {}, r"`decay_rate` must be >= 0"),
    (S.exponential_decay, (INF, 10, 0.5), {}, r"`learning_rate` must be finite, got inf\."),
    (S.natural_exp_decay, (0.1, 0.0, 0.5), {}, r"`decay_steps` must be > 0"),
    (S.natural_exp_decay, (0.1, 1, -1.0), {}, r"`decay_rate` must be >= 0"),
    (S.inverse_time_decay, (0.1, 0, 0.5), {}, r"`decay_steps` must be > 0"),
    (S.inverse_time_decay, (0.1, 1, NAN), {}, r"`decay_rate` must be finite"),
    (S.polynomial_decay, (0.1, 0), {}, r"`decay_steps` must be > 0"),
    (S.polynomial_decay, (0.1, 10, -1.0), {}, r"`end_learning_rate` must be >= 0"),
    (S.polynomial_decay, (0.1, 10), {"power": -1.0}, r"`power` must be >= 0"),
    (S.cosine_decay, (0.1, 0), {}, r"`decay_steps` must be > 0"),
    (S.cosine_decay, (0.1, 10), {"alpha": 1.5}, r"`alpha` must be in \[0.0, 1.0\], got 1.5\."),
    (S.cosine_decay_restarts, (0.1, 0), {}, r"`first_decay_steps` must be > 0"),
    (S.cosine_decay_restarts, (0.1, 5), {"t_mul": 0.0}, r"`t_mul` must be > 0"),
    (S.cosine_decay_restarts, (0.1, 5), {"m_mul": -0.5}, r"`m_mul` must be >= 0"),
    (S.cosine_decay_restarts, (0.1, 5), {"alpha": -0.1}, r"`alpha` must be in \[0.0, 1.0\]"),
    (S.linear_cosine_decay, (0.1, 0), {}, r"`decay_steps` must be > 0"),
    (S.linear_cosine_decay, (0.1, 10), {"num_periods": -1.0}, r"`num_periods` must be >= 0"),
    (S.linear_cosine_decay, (0.1, 10), {"beta": -1.0}, r"`beta` must be >= 0"),
    (S.noisy_linear_cosine_decay, (0.1, 0), {}, r"`decay_steps` must be > 0"),
    (S.noisy_linear_cosine_decay, (0.1, 10), {"initial_variance": -1.0}, r"`initial_variance` must be >= 0"),
    (S.noisy_linear_cosine_decay, (0.1, 10), {"variance_decay": -1.0}, r"`variance_decay` must be >= 0"),
    (
        S.piecewise_constant,
        ([10, 20], [1.0, 0.5]),
        {},
        r"`values` must have one element more than `boundaries` \(the length of boundaries should be 1 less "
        r"than the length of values\), got 2 boundaries and 2 values\.",
    ),
    (
        S.piecewise_constant,
        ([20, 10], [1.0, 0.5, 0.1]),
        {},
        r"`boundaries` must be strictly increasing, got \[20, 10\]",
    ),
    (S.piecewise_constant, ([10, 10], [1.0, 0.5, 0.1]), {}, r"`boundaries` must be strictly increasing"),
    (S.piecewise_constant, ([10, INF], [1.0, 0.5, 0.1]), {}, r"`boundaries\[1\]` must be finite"),
    (S.linear_warmup, (0.1, -1), {}, r"`warmup_steps` must be >= 0, got -1\."),
    (S.linear_warmup, (0.1, 5), {"init_value": NAN}, r"`init_value` must be finite"),
]

TYPE_ERRORS = [
    (
        S.exponential_decay,
        ("0.1", 10, 0.5),
        {},
        r"`learning_rate` must be a number or a scalar array, got '0.1' of type str\.",
    ),
    (S.exponential_decay, (0.1, None, 0.5), {}, r"`decay_steps` must be a number or a scalar array"),
    (S.exponential_decay, (0.1, 10, lambda c: 0.5), {}, r"`decay_rate` must be a number or a scalar array"),
    (S.exponential_decay, (0.1, 10, True), {}, r"`decay_rate` must be a number or a scalar array"),
    (
        S.exponential_decay,
        (0.1, 10, 0.5),
        {"staircase": 1},
        r"`staircase` must be True or False, got 1 of type int\.",
    ),
    (S.natural_exp_decay, (0.1, 10, 0.5), {"staircase": "yes"}, r"`staircase` must be True or False"),
    (S.inverse_time_decay, (jnp.ones(2), 10, 0.5), {}, r"`learning_rate` must be a scalar, got an array of"),
    (S.polynomial_decay, (0.1, 10), {"cycle": None}, r"`cycle` must be True or False"),
    (S.polynomial_decay, (0.1, 10), {"power": "2"}, r"`power` must be a number"),
    (S.cosine_decay, (0.1, 10), {"alpha": [0.1]}, r"`alpha` must be a number"),
    (S.cosine_decay_restarts, (0.1, 10), {"t_mul": None}, r"`t_mul` must be a number"),
    (S.linear_cosine_decay, (0.1, 10), {"num_periods": "1"}, r"`num_periods` must be a number"),
    (
        S.noisy_linear_cosine_decay,
        (0.1, 10),
        {"seed": 1.5},
        r"`seed` must be an integer, got 1.5 of type float\.",
    ),
    (S.noisy_linear_cosine_decay, (0.1, 10), {"beta": None}, r"`beta` must be a number"),
    (S.piecewise_constant, (10, [1.0, 0.5]), {}, r"`boundaries` must be a list of numbers, got 10\."),
    (S.piecewise_constant, ([10], 0.5), {}, r"`values` must be a list of numbers"),
    (
        S.piecewise_constant,
        ([10, "20"], [1.0, 0.5, 0.1]),
        {},
        r"`boundaries\[1\]` must be a number or a scalar array, got '20' of type str\.",
    ),
    (S.piecewise_constant, ([10], [1.0, None]), {}, r"`values\[1\]` must be a number"),
    (S.linear_warmup, ("0.1", 5), {}, r"`schedule` must be a number or a scalar array"),
    (S.linear_warmup, (0.1, 5.0), {}, r"`warmup_steps` must be an integer, got 5.0"),
    (S.linear_warmup, (0.1, 5), {"init_value": "0"}, r"`init_value` must be a number"),
]


def _error_id(case):
    return f"{case[0].__name__}-{case[3].split('`')[1]}"


@pytest.mark.parametrize("factory, args, kwargs, message", VALUE_ERRORS, ids=map(_error_id, VALUE_ERRORS))
def test_value_errors(factory, args, kwargs, message):
    with pytest.raises(ValueError, match=f"`{factory.__name__}`: {message}"):
        factory(*args, **kwargs)


@pytest.mark.parametrize("factory, args, kwargs, message", TYPE_ERRORS, ids=map(_error_id, TYPE_ERRORS))
def test_type_errors(factory, args, kwargs, message):
    with pytest.raises(TypeError, match=f"`{factory.__name__}`: {message}"):
        factory(*args, **kwargs)


def test_piecewise_constant_refuses_traced_boundaries():
    with pytest.raises(TypeError, match=r"`piecewise_constant`: `boundaries` must be known at construction"):
        jax.jit(lambda b: schedules.piecewise_constant([b], [1.0, 0.5])(3))(jnp.int32(2))


def test_signatures_follow_tf_order():
    assert float(schedules.polynomial_decay(1.0, 10, 0.0, 2.0, cycle=True)(15)) == pytest.approx(0.0625)
    with pytest.raises(TypeError):
        schedules.polynomial_decay(1.0, 10, 0.0, 2.0, True)  # bool options are keyword-only (STYLE.md)
    with pytest.raises(TypeError):
        schedules.exponential_decay(1.0, 10, 0.5, True)
    assert float(schedules.cosine_decay_restarts(1.0, 10, 1.0, 0.5, 0.0)(10)) == 0.5
    assert float(schedules.linear_cosine_decay(1.0, 10, 0.5, 0.0, 0.0)(10)) == 0.0
    with pytest.raises(TypeError):
        schedules.noisy_linear_cosine_decay(0.1, 10, 1.0, 0.55, 0.5, 0.0, 0.001, 3)  # seed is keyword-only
    with pytest.raises(TypeError):
        schedules.linear_warmup(0.1, 5, 0.0)  # init_value is keyword-only


def test_all_is_sorted_and_complete():
    assert schedules.__all__ == sorted(schedules.__all__)
    assert all(callable(getattr(schedules, name)) for name in schedules.__all__)
