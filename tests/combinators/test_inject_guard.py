"""inject_hyperparams' guard: a value set in the state outside its factory's range makes a jitted step NaN.

An eager step raises the factory's own error for it; under `jax.jit` the value is traced, so the
factory's checks record their conditions instead (`gradtx._core.checks.deferred`) and the step's
updates are NaN where one fails (`gradtx._core.checks.nan_unless`). Both inject_hyperparams are
covered: gradtx's and optax_compat's.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import optax_compat as ox
from gradtx._core import checks as _checks

INJECTS = {"gradtx": (gradtx.inject_hyperparams, gradtx), "optax_compat": (ox.inject_hyperparams, ox)}


def _params():
    return {"w": jnp.asarray([[0.5, -1.0], [2.0, 0.25]]), "b": jnp.asarray([0.1, -0.3])}


def _grads():
    return {"w": jnp.asarray([[0.3, 0.2], [-0.1, 0.4]]), "b": jnp.asarray([-0.2, 0.5])}


def _jitted_step(tx):
    @jax.jit
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    return step


def _all_nan(tree):
    return all(bool(jnp.all(jnp.isnan(x))) for x in jax.tree.leaves(tree))


def _all_finite(tree):
    return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(tree))


@pytest.mark.parametrize("lib", sorted(INJECTS))
def test_a_negative_rate_set_in_the_state_makes_the_jitted_step_nan_not_an_ascent(lib):
    inject, module = INJECTS[lib]
    tx = inject(module.adam)(learning_rate=0.1)
    step, params = _jitted_step(tx), _params()
    state = tx.init(params)
    state.hyperparams["learning_rate"] = -1.0
    new_params, _ = step(params, state, _grads())
    assert _all_nan(new_params)  # without the guard: every param moved up its gradient


@pytest.mark.parametrize("lib", sorted(INJECTS))
@pytest.mark.parametrize(
    ("name", "value"),
    [("b1", 1.5), ("b1", -0.1), ("b2", 2.0), ("eps", -1e-3), ("learning_rate", float("inf"))],
)
def test_every_range_the_factory_checks_is_guarded(lib, name, value):
    """The same declarations as the eager checks: `check_in_range`, `check_nonnegative`, finiteness."""
    inject, module = INJECTS[lib]
    tx = inject(module.adam)(learning_rate=0.1)
    params = _params()
    state = tx.init(params)
    state.hyperparams[name] = value
    assert _all_nan(_jitted_step(tx)(params, state, _grads())[0])


def _ftrl_on_w(learning_rate):
    """FTRL on `w`; `b` passes through `masked` unchanged, so only the guard can make it NaN."""
    return gradtx.masked(gradtx.ftrl(learning_rate), {"w": True, "b": False})


def test_ftrl_with_a_rate_of_zero_is_nan_by_the_guard():
    tx = gradtx.inject_hyperparams(_ftrl_on_w)(learning_rate=0.1)
    step, params = _jitted_step(tx), _params()
    state = tx.init(params)
    good, _ = step(params, state, _grads())
    assert _all_finite(good)
    state.hyperparams["learning_rate"] = 0.0
    bad, _ = step(params, state, _grads())
    assert _all_nan(bad["w"])  # FTRL divides by the rate: NaN by itself here
    assert _all_nan(bad["b"])  # untouched by FTRL's formula: NaN from the guard alone


def test_ftrl_with_a_negative_rate_is_nan_not_a_finite_wrong_step():
    """A negative rate is no division by zero: FTRL's formula steps finitely; the guard makes it NaN."""
    tx = gradtx.inject_hyperparams(gradtx.ftrl)(learning_rate=0.1)
    params = _params()
    state = tx.init(params)
    state.hyperparams["learning_rate"] = -0.5
    assert _all_nan(_jitted_step(tx)(params, state, _grads())[0])


@pytest.mark.parametrize(("rate", "ok"), [(0.1, True), (0.0, False), (-0.5, False)])
def test_the_guard_s_verdict_comes_from_the_factory_s_own_check(rate, ok):
    """`scale_by_ftrl` checks `learning_rate > 0`; built from a traced rate inside `deferred()`, that
    check is recorded as a traced condition instead of being skipped."""

    @jax.jit
    def verdict(lr):
        with _checks.deferred() as intervals:
            gradtx.ftrl(lr)
        assert intervals  # the checks met the traced rate
        return jnp.isfinite(_checks.nan_unless(intervals, jnp.ones(())))

    assert bool(verdict(jnp.float32(rate))) is ok


def test_outside_deferred_a_traced_value_is_not_checked_as_before():
    jax.jit(lambda lr: gradtx.adam(lr).init(jnp.zeros(1)))(jnp.float32(-1.0))  # no error, no condition


@pytest.mark.parametrize("lib", sorted(INJECTS))
def test_a_valid_change_steps_exactly_as_a_freshly_built_optimizer(lib):
    inject, module = INJECTS[lib]
    tx = inject(module.adam)(learning_rate=0.1)
    step, params = _jitted_step(tx), _params()
    state = tx.init(params)
    params, state = step(params, state, _grads())
    state.hyperparams["learning_rate"] = 0.05
    got, _ = step(params, state, _grads())
    fresh = module.adam(**state.hyperparams)  # the same float32 values: learning_rate=0.05, b1, b2, ...
    assert float(state.hyperparams["learning_rate"]) == np.float32(0.05)
    want, _ = _jitted_step(fresh)(params, state.inner_state, _grads())
    jax.tree.map(np.testing.assert_array_equal, got, want)
    assert _all_finite(got)


def test_the_guard_is_not_sticky_a_valid_rate_steps_again():
    tx = gradtx.inject_hyperparams(gradtx.adam)(learning_rate=0.1)
    step, params = _jitted_step(tx), _params()
    state = tx.init(params)
    state.hyperparams["learning_rate"] = -1.0
    bad, state = step(params, state, _grads())
    assert _all_nan(bad)
    state.hyperparams["learning_rate"] = 0.1  # Adam's moments do not depend on the rate
    assert _all_finite(step(params, state, _grads())[0])


@pytest.mark.parametrize(
    ("lib", "factory", "value", "message"),
    [
        ("gradtx", "adam", -1.0, r"`adam`: `learning_rate` must be >= 0"),
        ("gradtx", "ftrl", 0.0, r"`ftrl`: `learning_rate` must be > 0"),
        ("optax_compat", "adam", -1.0, r"`adam`: `learning_rate` must be >= 0"),
    ],
)
def test_an_eager_step_still_raises_the_factory_s_error(lib, factory, value, message):
    inject, module = INJECTS[lib]
    tx = inject(getattr(module, factory))(learning_rate=0.1)
    params = _params()
    state = tx.init(params)
    state.hyperparams["learning_rate"] = value
    with pytest.raises(ValueError, match=message):
        tx.update(_grads(), state, params)


def test_a_schedule_s_value_out_of_range_is_nan_under_jit_and_an_error_eagerly():
    tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=lambda count: 0.1 - 0.1 * count)
    step, params = _jitted_step(tx), _params()
    state = tx.init(params)
    for _ in range(2):  # rates 0.1 and 0.0
        params, state = step(params, state, _grads())
        assert _all_finite(params)
    eager_state = state
    params, state = step(params, state, _grads())  # rate -0.1
    assert _all_nan(params)
    with pytest.raises(ValueError, match=r"`sgd`: `learning_rate` must be >= 0"):
        tx.update(_grads(), eager_state, _params())


def test_row_sparse_updates_are_poisoned_in_their_values_only():
    rows = gradtx.sparse.RowSparse(jnp.asarray([0, 2]), jnp.ones((2, 3)), (4, 3))
    bad, good = (_checks.Interval(jnp.asarray(v), low=0.0) for v in (-1.0, 1.0))
    out = _checks.nan_unless([bad], {"t": rows, "none": None, "x": jnp.ones(2)})
    assert _all_nan(out["t"].values) and _all_nan(out["x"]) and out["none"] is None
    np.testing.assert_array_equal(out["t"].indices, [0, 2])
    kept = _checks.nan_unless([good], {"t": rows})
    np.testing.assert_array_equal(kept["t"].values, rows.values)


def _fusions(tx, n=4096):
    """The compiled step's loops over the updates (fusions with an output of the param's shape)."""
    params = jnp.ones(n)
    step = jax.jit(lambda p, s, g: tx.update(g, s, p)[0])
    text = step.lower(params, tx.init(params), params).compile().as_text()
    return len(re.findall(rf"= f32\[{n}\]\S* fusion\(", text))


@pytest.mark.parametrize("lib", sorted(INJECTS))
def test_the_guard_adds_no_pass_over_the_updates(lib, monkeypatch):
    """The guard's multiply fuses into the update's own loop: as many loops over the updates with the guard
    as without (its check of the values is a few scalar operations)."""
    inject, module = INJECTS[lib]
    guarded = _fusions(inject(module.adam)(learning_rate=0.1))
    monkeypatch.setattr(_checks, "nan_unless", lambda conditions, updates: updates)
    assert guarded == _fusions(inject(module.adam)(learning_rate=0.1))
