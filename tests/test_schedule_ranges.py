"""A hyperparameter given as a schedule is checked at every step against the range its constant is
checked against at construction (tests/test_bad_values.py): a value outside it raises in an eager step,
naming the factory, the argument, the step and the value, and makes the step's updates NaN under `jit`
(as an injected hyperparameter does). Every ranged hyperparameter of every registered factory."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._core import protocol as _protocol
from tests import catalog
from tests.test_bad_values import OWN_RANGES, RANGED, RANGES

PARAMS = {"kernel": jnp.asarray([[0.5, -1.0], [2.0, 0.25], [-0.5, 1.5]]), "bias": jnp.asarray([0.1, -0.2])}
GRADS = jax.tree.map(lambda p: 0.5 * p + 0.1, PARAMS)
SCHEDULED = [(e, n) for e, n in RANGED if _protocol.mark_of(e.factory, n) is _protocol.HYPERPARAMETER]


def _bad(entry: catalog.Entry, name: str) -> float:
    low, high = OWN_RANGES.get((entry.name, name), RANGES[name])
    return low - 0.5 if low is not None else high + 0.5


def _step(entry: catalog.Entry, tx, *, jit: bool = False):
    update = jax.jit(tx.update) if jit else tx.update
    return update(GRADS, tx.init(PARAMS), PARAMS, **entry.extra(0))[0]


def test_every_ranged_hyperparameter_is_covered():
    assert len(SCHEDULED) > 60


@pytest.mark.parametrize("entry, name", SCHEDULED, ids=[f"{e.name}-{n}" for e, n in SCHEDULED])
def test_an_out_of_range_schedule_raises_in_an_eager_step(entry, name):
    bad = _bad(entry, name)
    with pytest.raises(ValueError, match=rf"`{name}`"):
        entry.build(**{name: bad})  # the constant: refused at construction
    try:
        tx = entry.build(**{name: lambda count: jnp.float32(bad) + 0 * count})
    except ValueError as e:  # a schedule read at construction (FTRL's rate at step 0): refused there
        assert f"the schedule given as `{name}`" in str(e)
        return
    with pytest.raises(
        ValueError, match=rf"the schedule given as `{name}` returned {bad} at step 1; `{name}` must"
    ):
        _step(entry, tx)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda s: gradtx.adam(s), "learning_rate"),
        (lambda s: gradtx.momentum(0.1, s), "momentum"),
        (lambda s: gradtx.adam(0.1, b2=s), "b2"),
        (lambda s: gradtx.ftrl(0.5, l1=s), "l1"),
        (lambda s: gradtx.chain(gradtx.clip_by_global_norm(s), gradtx.sgd(0.1)), "max_norm"),
        (
            # injected: the factory is built each step from the values and checks them (its own message)
            lambda s: gradtx.inject_hyperparams(gradtx.adamw)(learning_rate=0.1, weight_decay=s),
            None,
        ),
    ],
    ids=["adam", "momentum", "adam-b2", "ftrl-l1", "chained-clip", "injected-schedule"],
)
@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_under_jit_the_step_of_an_out_of_range_value_is_nan(make, name, bad):
    """The schedule is in range for two steps, then out: those steps' updates are NaN, the others not."""
    tx = make(lambda count: jnp.where(count < 2, 0.5, bad))
    update = jax.jit(tx.update)
    state, finite = tx.init(PARAMS), []
    for _ in range(4):
        updates, state = update(GRADS, state, PARAMS)
        finite.append(all(bool(jnp.all(jnp.isfinite(u))) for u in jax.tree.leaves(updates)))
    assert finite == [True, True, False, False]
    eager = make(lambda count: np.float32(0.5 if count < 1 else bad))
    state = eager.init(PARAMS)
    eager.update(GRADS, state, PARAMS)
    with pytest.raises(ValueError, match=rf"`{name}` returned {bad} at step 2" if name else "`weight_decay`"):
        eager.update(GRADS, eager.update(GRADS, state, PARAMS)[1], PARAMS)


def test_a_schedule_inside_control_flow_is_nan_where_out_of_range():
    """Inside a `lax.cond` branch (`accumulate_gradients` runs its inner transform in one) the value is NaN
    where it is read: its trace cannot reach the outermost step's updates."""
    tx = gradtx.accumulate_gradients(gradtx.sgd(lambda count: jnp.where(count < 1, 0.5, -1.0)), every_k=1)
    update = jax.jit(tx.update)
    state, params = tx.init(PARAMS), PARAMS
    for _ in range(2):
        updates, state = update(GRADS, state, params)
        params = gradtx.apply_updates(params, updates)
    assert not np.isfinite(np.asarray(params["bias"])).any()


def test_a_constant_schedule_has_no_cost_beyond_the_constant():
    """In range: the same numbers as the constant (the check multiplies by one)."""
    for tx, same in (
        (gradtx.adam(lambda c: 0.1), gradtx.adam(0.1)),
        (gradtx.momentum(0.1, lambda c: 0.9), gradtx.momentum(0.1, 0.9)),
    ):
        a = jax.jit(tx.update)(GRADS, tx.init(PARAMS), PARAMS)[0]
        b = jax.jit(same.update)(GRADS, same.init(PARAMS), PARAMS)[0]
        jax.tree.map(np.testing.assert_array_equal, a, b)
