"""gradtx/schedules/_wsd.py: the warmup-stable-decay schedule against pytorch-optimizer's `get_wsd_schedule`
(the multipliers its `LambdaLR` sets over 100 steps, recorded by tools/references/wsd.py), for every decay
type, eagerly and jitted, and its floor option and errors."""

from __future__ import annotations

import inspect
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradtx import schedules
from tests.algorithms import _references

with np.load(_references.FIXTURES / "wsd.npz") as _f:
    META = json.loads(str(_f["meta"]))
    VALUES = {label: _f[f"{label}/values"] for label in META["cases"]}

ARGS = {  # pytorch-optimizer's names -> gradtx's
    "num_warmup_steps": "warmup_steps",
    "num_stable_steps": "stable_steps",
    "num_decay_steps": "decay_steps",
    "min_lr_ratio": "min_ratio",
    "cooldown_type": "decay_type",
    "num_cycles": "num_cycles",
}


def _schedule(label, peak=1.0, **extra):
    kwargs = {ARGS[k]: v for k, v in META["cases"][label]["kwargs"].items()}
    return schedules.warmup_stable_decay_schedule(peak, **{**kwargs, **extra})


@pytest.mark.parametrize("label", sorted(VALUES))
@pytest.mark.parametrize("peak", [1.0, 0.003])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_equals_pytorch_optimizers_multipliers(label, peak, jit):
    """Count c (step c + 1) gives the peak times the rate the reference's scheduler sets for step c + 1."""
    schedule = _schedule(label, peak)
    counts = jnp.arange(len(VALUES[label]), dtype=jnp.int32)
    ours = (jax.jit(jax.vmap(schedule)) if jit else jax.vmap(schedule))(counts)
    assert ours.dtype == jnp.float32
    np.testing.assert_allclose(ours, peak * VALUES[label], rtol=1e-5, atol=1e-6 * peak)


def test_the_cases_cover_every_decay_type_and_phase():
    types = {c["kwargs"].get("cooldown_type", "1-sqrt") for c in META["cases"].values()}
    assert types == set(schedules._wsd.DECAY_TYPES)
    for label, values in VALUES.items():
        kwargs = META["cases"][label]["kwargs"]
        end = kwargs["num_warmup_steps"] + kwargs["num_stable_steps"] + kwargs["num_decay_steps"]
        assert end < len(values), label  # the recorded values run past the decay


def test_defaults_are_pytorch_optimizers():
    """`get_wsd_schedule(optimizer, w, s, d, min_lr_ratio=0.0, num_cycles=0.5, cooldown_type='1-sqrt')`."""
    params = inspect.signature(schedules.warmup_stable_decay_schedule).parameters
    assert (params["min_ratio"].default, params["num_cycles"].default, params["decay_type"].default) == (
        0.0,
        0.5,
        "1-sqrt",
    )


@pytest.mark.parametrize("decay_type", ["1-sqrt", "linear", "1-square", "cosine"])
def test_decay_to_min_ends_at_the_floor(decay_type):
    lr = schedules.warmup_stable_decay_schedule(
        2.0, 0, 0, 1000, min_ratio=0.25, decay_type=decay_type, decay_to_min=True
    )
    values = np.array([float(lr(c)) for c in (0, 500, 999, 1000, 2000)])
    assert values[0] == 2.0 and values[-1] == values[-2] == 0.5
    assert 0.5 < values[1] < 2.0 and abs(values[2] - 0.5) < 0.1
    if decay_type == "cosine":  # the reference's cosine decays to the floor already
        plain = schedules.warmup_stable_decay_schedule(2.0, 0, 0, 1000, min_ratio=0.25, decay_type="cosine")
        assert float(plain(500)) == values[1]


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((-1.0, 1, 1, 1), {}, "peak_value"),
        ((1.0, -1, 1, 1), {}, "warmup_steps"),
        ((1.0, 1, 1.5, 1), {}, "stable_steps"),
        ((1.0, 1, 1, 1), {"min_ratio": 1.5}, "min_ratio"),
        ((1.0, 1, 1, 1), {"decay_type": "sqrt"}, "decay_type"),
        ((1.0, 1, 1, 1), {"num_cycles": float("nan")}, "num_cycles"),
        ((1.0, 1, 1, 1), {"decay_to_min": 1}, "decay_to_min"),
        ((lambda c: 1.0, 1, 1, 1), {}, "peak_value"),
    ],
)
def test_bad_arguments_are_refused_by_name(args, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=f"`{name}`"):
        schedules.warmup_stable_decay_schedule(*args, **kwargs)
