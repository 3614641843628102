"""gradtx/optax_compat/_table_schedules.py: optax's schedules, value for value against optax (eager and
jitted), with optax's signatures, and refusing arguments exactly where optax does."""

from __future__ import annotations

import ast
import inspect
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

optax = pytest.importorskip("optax")

from gradtx.optax_compat import schedules as S  # noqa: E402

NAMES = [
    "constant_schedule",
    "cosine_decay_schedule",
    "cosine_onecycle_schedule",
    "exponential_decay",
    "join_schedules",
    "linear_onecycle_schedule",
    "linear_schedule",
    "piecewise_constant_schedule",
    "piecewise_interpolate_schedule",
    "polynomial_schedule",
    "sgdr_schedule",
    "warmup_constant_schedule",
    "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
]


def call(name, *args, **kwargs):
    """A case: `M.<name>(*args, **kwargs)` for M = gradtx's module or optax."""
    return pytest.param(lambda m: getattr(m, name)(*args, **kwargs), id=f"{name}{args}{kwargs or ''}")


def joined(m):
    pieces = [m.constant_schedule(1.0), m.linear_schedule(1.0, 0.1, 10), m.exponential_decay(0.5, 3, 0.7)]
    return m.join_schedules(pieces, [5, 17])


def joined_at_zero(m):
    return m.join_schedules([m.constant_schedule(3.0), m.cosine_decay_schedule(2.0, 9)], [0])


CYCLES = [
    {"init_value": 0.0, "peak_value": 1.0, "warmup_steps": 5, "decay_steps": 20},
    {"init_value": 0.1, "peak_value": 0.5, "warmup_steps": 0, "decay_steps": 10, "end_value": 0.01},
    {"init_value": 0.0, "peak_value": 0.3, "warmup_steps": 3, "decay_steps": 15, "exponent": 2.0},
]

CASES = [
    call("constant_schedule", 0.1),
    call("constant_schedule", 5),
    call("polynomial_schedule", 1.0, 0.01, 2, 37),
    call("polynomial_schedule", 1.0, 0.01, 0.5, 37, 5),
    call("polynomial_schedule", 0.0, 1.0, 3, 20, transition_begin=4),
    call("polynomial_schedule", 1.0, -1.0, 1.5, 20),
    call("polynomial_schedule", 0.7, 0.1, 2, 0),
    call("polynomial_schedule", 0.7, 0.1, 2, -5),
    call("polynomial_schedule", 0.7, 0.1, 2, 12, -3),
    call("linear_schedule", 1.0, 0.01, 100),
    call("linear_schedule", 0.0, 1e-3, 50, 10),
    call("linear_schedule", -1.0, 1.0, 10),
    call("linear_schedule", 1.0, 0.0, 0),
    call("linear_schedule", 0.3, 0.1, 17, -4),
    call("piecewise_constant_schedule", 1.0, {10: 0.1, 20: 0.5}),
    call("piecewise_constant_schedule", 0.5),
    call("piecewise_constant_schedule", 0.5, {}),
    call("piecewise_constant_schedule", 2.0, {0: 0.5, 5: 3.0, 7: 0.0, 40: 2.0}),
    call("piecewise_constant_schedule", 1.0, {30: 0.1, 10: 0.5, 11: 0.3}),
    call("exponential_decay", 1.0, 10, 0.5),
    call("exponential_decay", 0.3, 13, 0.9),
    call("exponential_decay", 1.0, 41, 0.5, 3, True, 0.01),
    call("exponential_decay", 0.3, 7, 0.9, staircase=True),
    call("exponential_decay", 0.1, 5, 1.5, 2, False, 0.5),
    call("exponential_decay", 1.0, 10, 0.5, 0, False, 2.0),
    call("exponential_decay", 1.0, 10, 0.5, -4, True),
    call("exponential_decay", 1.0, 0, 0.5),
    call("exponential_decay", 1.0, -3, 0.5),
    call("exponential_decay", 1.0, 10, 0.0),
    call("cosine_decay_schedule", 1.0, 37),
    call("cosine_decay_schedule", 0.3, 37, 0.1),
    call("cosine_decay_schedule", 0.3, 40, 0.1, 2.0),
    call("cosine_decay_schedule", 1.0, 1),
    call("cosine_decay_schedule", 1.0, 20, 1.5),
    call("cosine_decay_schedule", 2.0, 25, -0.2, 0.5),
    call("cosine_decay_schedule", 1.0, 1000),
    pytest.param(joined, id="join_schedules(three pieces)"),
    pytest.param(joined_at_zero, id="join_schedules(boundary 0)"),
    call("piecewise_interpolate_schedule", "linear", 1.0, {4: 0.1, 8: 0.01}),
    call("piecewise_interpolate_schedule", "cosine", 0.7, {5: 0.3, 9: 0.1, 30: 3.0}),
    call("piecewise_interpolate_schedule", "linear", 0.5, None),
    call("piecewise_interpolate_schedule", "cosine", 2.0, {0: 0.5, 10: 2.0}),
    call("linear_onecycle_schedule", 100, 0.5),
    call("linear_onecycle_schedule", 10, 1.0, 0.2, 0.6, 10.0, 100.0),
    call("linear_onecycle_schedule", 7, 0.3),
    call("linear_onecycle_schedule", 1, 1.0),
    call("cosine_onecycle_schedule", 100, 0.5),
    call("cosine_onecycle_schedule", 10, 1.0, 0.2, 10.0, 100.0),
    call("cosine_onecycle_schedule", 3, 0.1, 0.5),
    call("warmup_constant_schedule", 0.0, 1.0, 10),
    call("warmup_constant_schedule", 0.1, 1.0, 0),
    call("warmup_constant_schedule", 1.0, 0.5, 7),
    call("warmup_cosine_decay_schedule", 0.0, 1.0, 10, 50),
    call("warmup_cosine_decay_schedule", 0.0, 1.0, 100, 140, 0.1, 2.0),
    call("warmup_cosine_decay_schedule", 0.0, 1.0, 0, 20, 0.1),
    call("warmup_cosine_decay_schedule", 0.0, 1.0, 1000, 1100),  # optax's ramp: (0 - 1)(1 - c/w) + 1
    call("warmup_cosine_decay_schedule", 0.5, 0.0, 5, 20),
    call("warmup_cosine_decay_schedule", 0.0, 1.0, 5, 20, 2.0),
    call("warmup_exponential_decay_schedule", 0.0, 1.0, 10, 5, 0.5),
    call("warmup_exponential_decay_schedule", 0.0, 1.0, 5, 7, 0.9, 3, True, 0.3),
    call("warmup_exponential_decay_schedule", 0.1, 1.0, 0, 4, 0.5),
    call("warmup_exponential_decay_schedule", 0.0, 1.0, 3, 0, 0.5),
    call("sgdr_schedule", CYCLES),
    call("sgdr_schedule", CYCLES[:1]),
]

COUNTS = [jnp.asarray(c, jnp.int32) for c in range(160)]


def values(schedule):
    return np.asarray([np.float32(schedule(c)) for c in COUNTS], np.float64)


@pytest.mark.parametrize("build", CASES)
def test_values_equal_optax(build):
    """gradtx eagerly and under jit, vs optax eagerly (optax's own jitted numbers can drift, see below)."""
    expected = values(build(optax))
    schedule = build(S)
    np.testing.assert_allclose(values(schedule), expected, rtol=1e-6, atol=0)
    # Under jit XLA fuses a * b + c; where 1 + cos(x) cancels, an ulp of the angle shows.
    atol = 1e-7 * np.max(np.abs(expected))
    np.testing.assert_allclose(values(jax.jit(schedule)), expected, rtol=1e-6, atol=atol)


@pytest.mark.parametrize(
    "build",
    [
        call("exponential_decay", 1.0, 41, 0.5, 3, True),
        call("polynomial_schedule", 1.0, 0.01, 0.5, 37),
        call("warmup_exponential_decay_schedule", 0.0, 1.0, 5, 41, 0.5, 0, True),
    ],
)
def test_jit_keeps_eager_numbers_at_exact_multiples(build):
    """XLA rewrites `c / 41` as `c * (1/41)`: `floor(41 / 41)` would be 0 and `(1 - 37/37) ** 0.5` NaN
    (as in optax's own jitted schedules); gradtx keeps optax's eager numbers."""
    expected = values(build(optax))
    np.testing.assert_allclose(values(jax.jit(build(S))), expected, rtol=1e-6, atol=0)


def test_all_names_sorted_and_in_optax():
    """Every schedule of NAMES, and every other name of `optax.schedules` (its stateful schedules and
    `inject_hyperparams`), nothing else."""
    assert S.__all__ == sorted(S.__all__)
    assert set(NAMES) <= set(S.__all__) <= set(dir(optax.schedules))


@pytest.mark.parametrize("name", NAMES)
def test_signature_equals_optax(name):
    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params(getattr(S, name)) == params(getattr(optax.schedules, name))


@pytest.mark.parametrize("name", NAMES)
def test_docstring_names_optax_namesake(name):
    doc = getattr(S, name).__doc__
    assert f"Equals `optax.{name}`" in " ".join(doc.split()) and ">>>" in doc


def test_no_optax_import():
    tree = ast.parse(pathlib.Path(S.__file__).read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[0] == "optax"]


# (name, args, the message after "`<name>`: ") -- optax refuses each of these too.
REFUSED = [
    (
        "piecewise_constant_schedule",
        (1.0, {5: 0.5, 9: -0.1}),
        r"the scales of `boundaries_and_scales` must be >= 0, got -0.1 at boundary 9\.",
    ),
    (
        "piecewise_constant_schedule",
        (1.0, {5: float("nan")}),
        r"the scales of `boundaries_and_scales` must be >= 0, got nan at boundary 5\.",
    ),
    (
        "piecewise_interpolate_schedule",
        ("linear", 1.0, {5: -1.0}),
        r"`boundaries_and_scales\[5\]` must be >= 0, got -1.0\.",
    ),
    ("piecewise_interpolate_schedule", ("quadratic", 1.0), r"`interpolate_type` must be one of"),
    ("cosine_decay_schedule", (1.0, 0), r"`decay_steps` must be > 0, got 0\."),
    ("cosine_decay_schedule", (1.0, -4), r"`decay_steps` must be > 0, got -4\."),
    ("linear_onecycle_schedule", (0, 1.0), r"`transition_steps` must be >= 1, got 0\."),
    ("cosine_onecycle_schedule", (-2, 1.0), r"`transition_steps` must be >= 1, got -2\."),
    ("warmup_cosine_decay_schedule", (0.0, 1.0, 10, 10), r"`decay_steps` must be > `warmup_steps`"),
]


@pytest.mark.parametrize("name, args, message", REFUSED)
def test_refuses_where_optax_refuses(name, args, message):
    with pytest.raises(ValueError):
        getattr(optax.schedules, name)(*args)
    with pytest.raises(ValueError, match=f"^`{name}`: {message}"):
        getattr(S, name)(*args)


def test_sgdr_without_cycles():
    with pytest.raises(ValueError, match=r"^`sgdr_schedule`: `cosine_kwargs` must hold at least one cycle"):
        S.sgdr_schedule([])
    with pytest.raises(IndexError):  # optax fails only when called
        optax.sgdr_schedule([])(0)
