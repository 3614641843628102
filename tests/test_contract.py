"""The contract every registered factory keeps (a new factory joins by being registered).

jit; no retrace on the second call; stable state structure; bf16 and f32 kept; init from
`jax.ShapeDtypeStruct`; empty and None leaves; unknown extra args ignored; every per-step
numeric hyperparameter accepts a schedule; `inject_hyperparams` equals the plain call;
optimizers converge on a quadratic. Row-sparse gradients: tests/test_contract_sparse.py;
dtypes of states: tests/test_state_dtypes.py.

Each entry's transform and jitted step are built once per test process and shared by the
tests (compilation dominates the cost of this suite).
"""

from __future__ import annotations

import contextlib
import functools
import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import catalog, helpers
from tests.parallel._util import mapped

ENTRIES = catalog.entries()
OPTIMIZERS = catalog.entries("optimizer")
IDS = [e.name for e in ENTRIES]
BY_ENTRY = pytest.mark.parametrize("entry", ENTRIES, ids=IDS)


def _params(dtype=jnp.float32):
    rng = np.random.default_rng(0)
    return {
        "dense": {
            "kernel": jnp.asarray(rng.standard_normal((4, 3)), dtype),
            "bias": jnp.asarray(rng.standard_normal(3), dtype),
        },
        "scalar": jnp.asarray(0.5, dtype),
        "layers": [jnp.asarray(rng.standard_normal(5), dtype)],
    }


def _grads(params, seed=1):
    leaves, treedef = jax.tree.flatten(params)
    rng = np.random.default_rng(seed)
    return treedef.unflatten([jnp.asarray(rng.standard_normal(np.shape(x)), x.dtype) for x in leaves])


def _apply(entry, tx, params, state, grads, t):
    updates, state = tx.update(grads, state, params, **entry.extra(t))
    return gradtx.apply_updates(params, updates), state


def _mapped(entry, tx):
    """Parallel wrappers run their `init`/`update` with the axis bound to one replica
    (`tests.parallel._util.mapped`)."""
    axis = entry.example.get("axis_name")
    return tx if axis is None else mapped(tx, axis)


def _build(entry, **overrides):
    return _mapped(entry, entry.build(**overrides))


@functools.lru_cache(maxsize=None)
def _built(name):
    """The entry, its transform and a jitted step `(params, state, grads, t) -> (params, state)`."""
    entry = catalog.entry(name)
    tx = _build(entry)
    return entry, tx, jax.jit(functools.partial(_apply, entry, tx))


def _run(entry, tx, params, grads_seq):
    """`helpers.run` with the entry's extra arguments (e.g. AdamGS's global_step) at each step."""
    return helpers.run(tx, params, grads_seq, extra_args_seq=[entry.extra(t) for t in range(len(grads_seq))])


@BY_ENTRY
def test_registry_example_builds_and_get_agrees(entry):
    entry, tx, step = _built(entry.name)
    assert isinstance(tx, gradtx.GradientTransformation)
    by_name = _mapped(entry, gradtx.get(entry.name, **entry.example))
    params = _params()
    a = _apply(entry, tx, params, tx.init(params), _grads(params), 0)[0]
    b = _apply(entry, by_name, params, by_name.init(params), _grads(params), 0)[0]
    helpers.assert_trees_close(a, b, rtol=0, atol=0)


@BY_ENTRY
def test_jit_no_retrace_stable_state_and_eager_agreement(entry):
    """Two steps with jit and without (`chex.fake_jit`): one trace, a stable state, the same numbers."""
    entry, tx, _ = _built(entry.name)
    params = _params()
    finals = {}
    chex.clear_trace_counter()  # `step` below is one function to chex, whatever the entry
    for jitted in (True, False):

        def step(params, state, grads, t):
            return _apply(entry, tx, params, state, grads, t)

        with contextlib.nullcontext() if jitted else chex.fake_jit():
            run = jax.jit(chex.assert_max_traces(step, n=1) if jitted else step)
            state0 = tx.init(params)
            p1, s1 = run(params, state0, _grads(params, 1), 0)
            p2, s2 = run(p1, s1, _grads(params, 2), 1)  # a second trace fails chex.assert_max_traces
        chex.assert_trees_all_equal_structs(s2, state0)
        chex.assert_trees_all_equal_shapes_and_dtypes(s2, state0)
        finals[jitted] = p2
    tol = helpers.tolerance(entry.name)
    helpers.assert_trees_close(finals[True], finals[False], **tol)


@BY_ENTRY
def test_a_donated_step_runs_in_place_on_a_fresh_state(entry):
    """With params and state donated, every output buffer is a donated input: no hidden copies (wrappers
    included); and no state leaf is another leaf's buffer or a param's (donating one buffer twice fails at
    run time). One compiled step for both; a 256 x 256 kernel makes a hidden copy show."""
    entry, tx, _ = _built(entry.name)
    rng = np.random.default_rng(0)
    shapes = {"dense": {"kernel": (256, 256), "bias": (256,)}, "scalar": (), "layers": [(300,)]}
    params = jax.tree.map(
        lambda shape: jnp.asarray(rng.standard_normal(shape), jnp.float32),
        shapes,
        is_leaf=lambda x: isinstance(x, tuple),
    )
    state = tx.init(params)
    buffers = [id(x) for x in jax.tree.leaves((params, state)) if isinstance(x, jax.Array)]
    assert len(buffers) == len(set(buffers)), "a state leaf shares its buffer with another leaf"
    grads = _grads(params)
    step = jax.jit(lambda p, s, g: _apply(entry, tx, p, s, g, 0), donate_argnums=(0, 1))
    compiled = step.lower(params, state, grads).compile()
    memory = compiled.memory_analysis()
    if memory is not None:  # (a backend may report none)
        assert memory.output_size_in_bytes - memory.alias_size_in_bytes <= 256, memory  # a few scalars
    jax.block_until_ready(compiled(params, state, grads))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@BY_ENTRY
def test_dtypes_are_kept(entry, dtype):
    entry, tx, step = _built(entry.name)
    params = _params(dtype)
    state0 = tx.init(params)
    updates, state1 = tx.update(_grads(params), state0, params, **entry.extra(0))  # eager: cheaper
    update_leaf = lambda x: not isinstance(x, (dict, list, tuple))  # noqa: E731 -- an array, or agn's `Pull`
    assert jax.tree.map(lambda u: u.dtype, updates, is_leaf=update_leaf) == jax.tree.map(
        lambda p: p.dtype, params
    )
    assert helpers.shape_dtypes(state1) == helpers.shape_dtypes(state0)
    new_params = gradtx.apply_updates(params, updates)
    assert jax.tree.map(lambda u: u.dtype, new_params) == jax.tree.map(lambda p: p.dtype, params)
    chex.assert_tree_all_finite(new_params)


@BY_ENTRY
def test_init_from_shape_dtype_structs(entry):
    entry, tx, _ = _built(entry.name)
    params = _params()
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
    assert helpers.shape_dtypes(jax.eval_shape(tx.init, abstract)) == helpers.shape_dtypes(tx.init(params))


@BY_ENTRY
def test_empty_and_none_leaves(entry):
    entry, tx, _ = _built(entry.name)
    params = {**_params(), "empty": jnp.zeros((0, 3)), "frozen": None}
    grads = {**_grads(_params()), "empty": jnp.zeros((0, 3)), "frozen": None}
    new_params, _ = jax.jit(lambda p, s, g: _apply(entry, tx, p, s, g, 0))(params, tx.init(params), grads)
    assert new_params["frozen"] is None
    assert new_params["empty"].shape == (0, 3)
    reference, _ = _apply(entry, tx, _params(), tx.init(_params()), _grads(_params()), 0)
    got = {k: new_params[k] for k in reference}
    helpers.assert_trees_close(got, reference, **helpers.tolerance(entry.name))  # Muon: differently compiled


@BY_ENTRY
def test_unknown_extra_args_are_ignored(entry):
    entry, tx, _ = _built(entry.name)
    params = _params()
    state = tx.init(params)
    plain = tx.update(_grads(params), state, params, **entry.extra(0))
    with_extra = tx.update(
        _grads(params), state, params, some_unknown_argument=jnp.ones(3), another=None, **entry.extra(0)
    )
    helpers.assert_trees_close(with_extra, plain, rtol=0, atol=0)


def _numeric_args(entry):
    """Float arguments (ints such as `every_k` or `seed` are structure, not per-step hyperparameters)."""
    return [k for k, v in entry.example.items() if isinstance(v, float)]


def _numeric_hyperparams(entry):
    """Numeric arguments that act at every step (initial slot values are set once, at init)."""
    return [k for k in _numeric_args(entry) if not k.startswith("initial_")]


@pytest.mark.parametrize(
    "entry",
    [e for e in ENTRIES if len(_numeric_args(e)) > len(_numeric_hyperparams(e))],
    ids=lambda e: e.name,
)
def test_initial_slot_values_refuse_schedules(entry):
    for name in set(_numeric_args(entry)) - set(_numeric_hyperparams(entry)):
        with pytest.raises(TypeError, match=rf"`{name}` must be a number or a scalar array \(not a schedule"):
            _build(entry, **{name: lambda count: 0.1})


@pytest.mark.parametrize("entry", [e for e in ENTRIES if _numeric_hyperparams(e)], ids=lambda e: e.name)
def test_every_numeric_hyperparameter_accepts_a_schedule(entry):
    """A schedule returning an example's value (as float32) gives the plain call's steps with that value."""
    params = _params()
    grads = [_grads(params, seed) for seed in range(3)]
    as_scheduled = {k: np.float32(entry.example[k]) for k in _numeric_hyperparams(entry)}
    plain = _run(entry, _build(entry, **as_scheduled), params, grads)[0]
    scheduled = _build(
        entry,
        **{
            name: (lambda count, v=entry.example[name]: jnp.asarray(v, jnp.float32))
            for name in _numeric_hyperparams(entry)
        },
    )
    helpers.assert_trees_close(_run(entry, scheduled, params, grads)[0], plain, rtol=1e-6, atol=1e-7)


def _as_float32(entry):
    """Every float argument of the entry's factory (its example's and its defaults) as a float32 scalar: the
    values `inject_hyperparams` injects, or that a schedule returning float32 gives."""
    bound = inspect.signature(entry.factory).bind(**entry.example)
    bound.apply_defaults()
    return {k: np.float32(v) for k, v in bound.arguments.items() if isinstance(v, float)}


@BY_ENTRY
def test_inject_hyperparams_equals_the_plain_call(entry):
    """Injected values are float32 scalars (`inject_hyperparams`' default dtype): the plain call given the
    same float32 values computes the same steps (given Python floats, an optax-style rule forms `1 - b2` in
    double precision, as optax does; float32's is 1e-5 away at b2 = 0.999)."""
    params = _params()
    grads = [_grads(params, seed) for seed in range(3)]
    plain = _run(entry, _build(entry, **_as_float32(entry)), params, grads)[0]
    injected_tx = gradtx.inject_hyperparams(entry.factory)(**entry.example)
    injected, state = _run(entry, _mapped(entry, injected_tx), params, grads)
    helpers.assert_trees_close(injected, plain, rtol=1e-6, atol=1e-7)
    assert set(_numeric_args(entry)) <= set(state.hyperparams)


def _quadratic_loss(params, target, curvature):
    return sum(
        0.5 * jnp.sum(c * (p - t) ** 2)
        for p, t, c in zip(
            jax.tree.leaves(params), jax.tree.leaves(target), jax.tree.leaves(curvature), strict=True
        )
    )


@pytest.mark.parametrize("entry", OPTIMIZERS, ids=[e.name for e in OPTIMIZERS])
def test_optimizer_converges_on_a_quadratic(entry):
    entry, tx, _ = _built(entry.name)
    params = _params()
    target = _grads(params, seed=7)
    curvature = jax.tree.map(lambda x: jnp.linspace(0.5, 2.0, x.size).reshape(x.shape), params)

    def body(t, carry):
        params, state = carry
        grads = jax.grad(_quadratic_loss)(params, target, curvature)
        return _apply(entry, tx, params, state, grads, t)

    first = _quadratic_loss(params, target, curvature)
    params, _ = jax.jit(lambda p, s: jax.lax.fori_loop(0, 300, body, (p, s)))(params, tx.init(params))
    final = _quadratic_loss(params, target, curvature)
    assert final < 0.01 * first, f"{entry.name}: loss {float(first):.4g} -> {float(final):.4g}"


@pytest.mark.parametrize("entry", [e for e in ENTRIES if "axis_name" in e.example], ids=lambda e: e.name)
def test_parallel_wrappers_raise_outside_the_mapped_axis(entry):
    tx, params = entry.build(), _params()
    with pytest.raises(ValueError, match=rf"`{entry.name}`: the axis name 'data' is not bound here"):
        tx.update(
            _grads(params),
            jax.eval_shape(tx.init, params) if entry.name == "sharded_state" else tx.init(params),
            params,
        )


def test_missing_extra_argument_is_a_clear_error():
    tx = gradtx.adam_gs(0.1)
    with pytest.raises(
        gradtx.MissingExtraArgError,
        match=r"needs the extra argument `global_step`; call it as "
        r"`tx.update\(grads, state, params, global_step=step\)`",
    ):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
