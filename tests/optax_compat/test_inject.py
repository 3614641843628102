"""gradtx/optax_compat/_inject.py beside optax 0.2.8's `inject_hyperparams`: the same classification of
arguments, hyperparameter dtypes, state layout and numbers over 20 steps, eager and jitted."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx.optax_compat as compat

optax = pytest.importorskip("optax")

STEPS = 20


def _lin(lib):
    return lib.linear_schedule(0.1, 0.9, 10)  # a strong float32 value: optax keeps it float32


# (factory, lambda lib: kwargs, also with bf16 params): floats, ints, arrays and schedules.
CASES = [
    ("adam", lambda lib: {"learning_rate": 0.05, "b1": 0.8, "b2": 0.99}, True),
    ("adam", lambda lib: {"learning_rate": 1, "b2": 0.99, "eps": 1}, True),
    ("adam", lambda lib: {"learning_rate": jnp.asarray(0.05), "b1": np.asarray(0.8), "b2": 0.99}, True),
    ("adam", lambda lib: {"learning_rate": lambda count: 0.1 / (1 + count), "b2": 0.99}, True),
    ("adam", lambda lib: {"learning_rate": _lin(lib), "b1": jnp.asarray(0.8, jnp.float32)}, False),
    ("sgd", lambda lib: {"learning_rate": 0.1, "momentum": 0.9}, True),
    ("sgd", lambda lib: {"learning_rate": 1, "nesterov": True, "momentum": 0.5}, True),
    ("sgd", lambda lib: {"learning_rate": jnp.asarray(0.1, jnp.float32)}, False),
    ("sgd", lambda lib: {"learning_rate": 0.1, "momentum": lambda count: 0.5 + 0.01 * count}, True),
    ("trace", lambda lib: {"decay": 0.9}, True),
    ("trace", lambda lib: {"decay": jnp.asarray(0.5), "nesterov": True}, True),
    ("trace", lambda lib: {"decay": lambda count: 0.9 - 0.02 * count}, True),
    ("trace", lambda lib: {"decay": _lin(lib)}, False),
]
RUNS = [
    pytest.param(name, kwargs, dtype, id=f"{name}-{i}-{'f32' if dtype == jnp.float32 else 'bf16'}")
    for i, (name, kwargs, bf16) in enumerate(CASES)
    for dtype in ([jnp.float32, jnp.bfloat16] if bf16 else [jnp.float32])
]
"""Each case with f32 params, and with bf16 params where no strong float32 value meets them (see
test_strong_float32_values_with_bf16_params)."""


def _params(dtype):
    k = jax.random.split(jax.random.PRNGKey(0), 2)
    return {
        "w": jax.random.normal(k[0], (4, 3)).astype(dtype),
        "b": jax.random.normal(k[1], (3,)).astype(dtype),
    }


def _grads(step, params):
    key = jax.random.fold_in(jax.random.PRNGKey(1), step)
    return jax.tree.map(
        lambda p, k: (p * 0.5 + jax.random.normal(k, p.shape)).astype(p.dtype),
        params,
        dict(zip(sorted(params), jax.random.split(key, len(params)), strict=True)),
    )


def _run(lib, tx, dtype, jit):
    params = _params(dtype)
    state = tx.init(params)

    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return lib.apply_updates(p, u), s

    step = jax.jit(step) if jit else step
    for t in range(STEPS if jit else 5):  # eager: 5 steps (each rebuilds the inner transform, in optax too)
        params, state = step(params, state, _grads(t, params))
    return params, state


def _structure(tree):
    """The tree's structure as text: class names, fields and keys (the classes are gradtx's and optax's)."""
    return str(jax.tree.structure(tree))


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize(("name", "kwargs", "dtype"), RUNS)
def test_twenty_steps_equal_optax(name, kwargs, dtype, jit):
    ours = _run(compat, compat.inject_hyperparams(getattr(compat, name))(**kwargs(compat)), dtype, jit)
    theirs = _run(optax, optax.inject_hyperparams(getattr(optax, name))(**kwargs(optax)), dtype, jit)
    assert isinstance(ours[1], compat.InjectStatefulHyperparamsState)
    assert _structure(ours[1]) == _structure(theirs[1])
    tol = 1e-6 if dtype == jnp.float32 else 1e-2
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        assert jnp.result_type(a) == jnp.result_type(b)
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=tol, atol=tol)


def test_strong_float32_values_with_bf16_params():
    """optax keeps a strong float32 value (its own schedules give one) and its bf16 leaves' updates and
    trace become float32; gradtx's building blocks keep each state leaf in its parameter's dtype. The
    hyperparameters are optax's either way."""
    for lib in (compat, optax):
        tx = lib.inject_hyperparams(lib.trace)(decay=_lin(lib))
        state = tx.init(_params(jnp.bfloat16))
        _, state = tx.update(_grads(0, _params(jnp.bfloat16)), state)
        assert state.hyperparams["decay"].dtype == jnp.float32
    assert state.inner_state.trace["w"].dtype == jnp.float32  # optax's
    ours = compat.inject_hyperparams(compat.trace)(decay=_lin(compat))
    _, state = ours.update(_grads(0, _params(jnp.bfloat16)), ours.init(_params(jnp.bfloat16)))
    assert state.inner_state.trace["w"].dtype == jnp.bfloat16


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("lib", [compat, optax], ids=["gradtx", "optax"])
def test_hyperparam_default_dtype(lib, dtype):
    """optax's own test: float values take the params' dtype; a strong-typed array keeps its own."""
    params = [jnp.ones((1, 2), dtype=dtype), jnp.ones(2, dtype=dtype)]
    for b1, b2, want in [
        (0.9, 0.95, (dtype, dtype)),
        (jnp.asarray(0.9), jnp.asarray(0.95), (dtype, dtype)),
        (jnp.asarray(0.9, jnp.float32), jnp.asarray(0.95, jnp.bfloat16), (jnp.float32, jnp.bfloat16)),
    ]:
        state = jax.jit(lib.inject_hyperparams(lib.scale_by_adam)(b1=b1, b2=b2).init)(params)
        assert (state.hyperparams["b1"].dtype, state.hyperparams["b2"].dtype) == want


@pytest.mark.parametrize(
    ("hyper", "param", "grad"),
    [
        (jnp.bfloat16, jnp.float32, jnp.bfloat16),
        (jnp.float32, jnp.bfloat16, jnp.bfloat16),
        (jnp.float32, jnp.bfloat16, jnp.float32),
    ],
)
def test_hyperparam_dtype_overrides(hyper, param, grad):
    tx = compat.inject_hyperparams(compat.scale_by_adam, hyperparam_dtype=hyper)(b1=0.9, b2=0.95)
    params = [jnp.ones((1, 2), param), jnp.ones(2, param)]
    state = jax.jit(tx.init)(params)
    _, state = jax.jit(tx.update)([p.astype(grad) for p in params], state)
    assert state.hyperparams["b1"].dtype == state.hyperparams["b2"].dtype == hyper


def test_ints_are_injected_and_bools_stay_static():
    state = compat.inject_hyperparams(compat.sgd)(learning_rate=1, momentum=0.9, nesterov=True).init(
        jnp.ones(2)
    )
    assert state.hyperparams["learning_rate"].dtype == jnp.int32
    assert sorted(state.hyperparams) == ["learning_rate", "momentum"]  # None and bools stay static


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
def test_a_rate_that_bf16_rounds_out_of_range_is_refused(jit):
    """bf16 rounds adam's default b2=0.999 to 1.0: optax steps to NaN, gradtx says why at init."""
    theirs = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    params = jnp.ones(3, jnp.bfloat16)
    assert jnp.isnan(theirs.update(params, theirs.init(params), params)[0]).all()
    init = compat.inject_hyperparams(compat.adam)(learning_rate=0.1).init
    with pytest.raises(ValueError, match=r"`b2` must be in \[0.0, 1.0\).*cast the values to bfloat16"):
        (jax.jit(init) if jit else init)(params)
    state = compat.inject_hyperparams(compat.adam, hyperparam_dtype=jnp.float32)(0.1).init(params)
    assert state.hyperparams["b2"].dtype == jnp.float32


def test_starts_with_step_count_zero():
    tx = compat.inject_hyperparams(compat.scale)(lambda count: count)
    updates, _ = jax.jit(tx.update)(jnp.array([-1.0, 0.0, 1.0]), tx.init(jnp.zeros(3)))
    np.testing.assert_array_equal(updates, np.zeros(3))


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
def test_editing_hyperparams_between_steps_equals_optax(jit):
    out = []
    for lib in (compat, optax):
        tx = lib.inject_hyperparams(lib.sgd)(learning_rate=0.1, momentum=0.9)
        state = tx.init(jnp.zeros(2))
        update = jax.jit(tx.update) if jit else tx.update
        for i in range(4):
            state.hyperparams["learning_rate"] = 0.1 * (i + 1)
            u, state = update(jnp.ones(2), state)
        out.append(u)
    np.testing.assert_allclose(out[0], out[1], rtol=1e-6)


WRAPPERS = {
    "alone": lambda lib, tx: tx,
    "chain": lambda lib, tx: lib.chain(lib.clip(1.0), tx),
    "apply_if_finite": lambda lib, tx: lib.apply_if_finite(tx, 2),
    "MultiSteps": lambda lib, tx: lib.MultiSteps(tx, 2),
}


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_tree_set_learning_rate_through_wrappers(wrapper, jit):
    """`optax.tree.set(state, learning_rate=...)` reaches the injected value inside each wrapper."""
    params = {"w": jnp.linspace(-1.0, 1.0, 3)}
    out = []
    for lib in (compat, optax):
        tx = WRAPPERS[wrapper](lib, lib.inject_hyperparams(lib.adam)(learning_rate=0.1))
        state = tx.init(params)
        update = jax.jit(tx.update) if jit else tx.update
        steps = []
        for t in range(6):
            state = optax.tree.set(state, learning_rate=0.5 / (t + 1))
            u, state = update(jax.tree.map(lambda p, t=t: p * (t + 1) - 0.5, params), state, params)
            steps.append(u["w"])
        out.append((np.stack(steps), float(optax.tree.get(state, "learning_rate"))))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-6, atol=1e-7)
    assert out[0][1] == pytest.approx(out[1][1]) == pytest.approx(0.5 / 6)


class _TotalState(NamedTuple):
    total: jax.Array


class _Total:
    """optax's example stateful schedule: the sum of the `addendum` extra arguments seen so far."""

    def init(self):
        return _TotalState(total=jnp.zeros([], jnp.int32))

    def update(self, state, **extra_args):
        return _TotalState(total=state.total + extra_args["addendum"])

    def __call__(self, state, **extra_args):
        return state.total


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
def test_stateful_schedule_gets_the_extra_args(jit):
    grads = (jnp.ones(3), jnp.ones(2))
    out = []
    for lib in (compat, optax):
        tx = lib.inject_hyperparams(lib.scale)(step_size=_Total())
        state = (jax.jit(tx.init) if jit else tx.init)(grads)
        update = jax.jit(tx.update) if jit else tx.update
        for _ in range(3):
            u, state = update(grads, state, params=grads, addendum=0.3 * jnp.ones(()))
        out.append((u, state))
    (u, state), (u_theirs, state_theirs) = out
    np.testing.assert_allclose(state.hyperparams["step_size"], 0.6, rtol=1e-6)  # the value before the step
    np.testing.assert_allclose(state.hyperparams_states["step_size"].total, 0.9, rtol=1e-6)
    assert state.hyperparams_states["step_size"].total.dtype == jnp.float32  # int32 at init, as optax's
    for a, b in zip(jax.tree.leaves((u, state)), jax.tree.leaves((u_theirs, state_theirs)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert _structure(state) == _structure(state_theirs)


def test_stateful_schedule_whose_state_changes_dtype_inside_chain():
    grads = (jnp.ones(3), jnp.ones(2))
    tx = compat.chain(compat.inject_hyperparams(compat.scale)(step_size=_Total()))
    state = tx.init(grads)
    for _ in range(3):
        u, state = tx.update(grads, state, addendum=0.3 * jnp.ones(()))
    np.testing.assert_allclose(u[0], 0.6, rtol=1e-6)


def test_wrapped_schedule_counts_steps():
    schedule = compat.linear_schedule(1.0, 0.0, 10)
    wrapped = compat.WrappedSchedule(schedule)
    state = wrapped.init()
    for count in range(5):
        assert int(state.count) == count
        np.testing.assert_allclose(wrapped(state), schedule(count))
        state = wrapped.update(state, loss=jnp.ones(()))


def test_inject_stateful_hyperparams_warns_and_injects():
    with pytest.warns(DeprecationWarning, match="inject_stateful_hyperparams is deprecated"):
        factory = compat.inject_stateful_hyperparams(compat.sgd)
    state = factory(learning_rate=0.1).init(jnp.zeros(1))
    assert isinstance(state, compat.InjectStatefulHyperparamsState)


def test_state_classes_have_optax_s_fields():
    assert compat.InjectStatefulHyperparamsState._fields == optax.InjectStatefulHyperparamsState._fields
    assert compat.InjectHyperparamsState._fields == optax.InjectHyperparamsState._fields


@pytest.mark.parametrize("static_args", ["step_sz", ["step_sz"], [1]])
@pytest.mark.parametrize("lib", [compat, optax], ids=["gradtx", "optax"])
def test_static_args_not_an_argument(lib, static_args):
    shown = r"\[1\]" if static_args == [1] else r"\['step_sz'\]"
    match = (
        rf"`inject_hyperparams`: `static_args` names {shown}, which scale does not take"
        if lib is compat
        else None
    )
    with pytest.raises(ValueError, match=match):
        lib.inject_hyperparams(lib.scale, static_args=static_args)


@pytest.mark.parametrize("lib", [compat, optax], ids=["gradtx", "optax"])
def test_static_args_not_iterable(lib):
    with pytest.raises(TypeError, match="must be an argument name or an iterable" if lib is compat else None):
        lib.inject_hyperparams(lib.scale, static_args=3)


def test_wrong_arguments_name_the_factory():
    with pytest.raises(TypeError, match=r"`inject_hyperparams\(sgd\)`: missing a required argument"):
        compat.inject_hyperparams(compat.sgd)(lr=0.1)


@pytest.mark.parametrize("static_args", ["mask", ["mask"]])
def test_a_static_callable_is_not_a_schedule(static_args):
    """optax's own test: a mask function named in `static_args` is passed as it is, not injected."""

    def custom(learning_rate, mask):
        return compat.masked(compat.scale(-learning_rate), mask)

    tx = compat.inject_hyperparams(custom, static_args=static_args)(
        0.1, lambda p: jax.tree.map(lambda x: x.ndim > 1, p)
    )
    params = [jnp.ones((1, 2)), jnp.ones(2)]
    state = jax.jit(tx.init)(params)
    updates, state = jax.jit(tx.update)(params, state)
    assert set(state.hyperparams) == {"learning_rate"}
    np.testing.assert_allclose(updates[0], -0.1 * params[0], rtol=1e-6)
    np.testing.assert_allclose(updates[1], params[1])


def test_numeric_static_args_are_not_injected():
    tx = compat.inject_hyperparams(compat.scale_by_adam, static_args=["b1", "b2"])(b1=0.9, b2=0.95)
    state = tx.init(jnp.ones(2))
    assert sorted(state.hyperparams) == ["eps", "eps_root"]


def test_values_are_checked_when_the_factory_is_called():
    with pytest.raises(ValueError, match=r"`b1` must be"):
        compat.inject_hyperparams(compat.adam)(learning_rate=0.1, b1=1.5)


def test_no_retrace_when_a_hyperparameter_changes():
    tx = compat.inject_hyperparams(compat.adam)(learning_rate=0.1)
    traces = []

    @jax.jit
    def step(g, s):
        traces.append(1)
        return tx.update(g, s)

    state = tx.init(jnp.ones(2))
    for i in range(3):
        state.hyperparams["learning_rate"] = jnp.asarray(0.1 * i, jnp.float32)
        _, state = step(jnp.ones(2), state)
    assert len(traces) == 1
    assert state.hyperparams["learning_rate"].dtype == jnp.float32
