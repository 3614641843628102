"""accumulate_gradients (optax's MultiSteps, in _accumulate.py) and apply_if_finite (_apply_if_finite.py)."""

import functools
import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import helpers
from tests.parallel import _util

DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]


def test_accumulating_k_small_batches_equals_one_step_on_their_mean():
    params = {"w": jnp.arange(3.0)}
    grads = [{"w": jnp.array([1.0, -2.0, 0.5]) * (i + 1)} for i in range(6)]
    acc, state = helpers.run(gradtx.accumulate_gradients(gradtx.adam(0.1), every_k=3), params, grads)
    means = [jax.tree.map(lambda *g: sum(g) / 3, *grads[i : i + 3]) for i in (0, 3)]
    big, _ = helpers.run(gradtx.adam(0.1), params, means)
    helpers.assert_trees_close(acc[1], params, rtol=0, atol=0)  # nothing applied before the 3rd
    helpers.assert_trees_close(acc[2], big[0], rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(acc[5], big[1], rtol=1e-6, atol=1e-7)
    assert int(state.inner_state[0].count) == 2  # the inner optimizer advanced once per applied update
    assert int(state.count) == 2 and int(state.mini_step) == 0
    np.testing.assert_array_equal(state.accumulator["w"], 0.0)


def _scan(tx, params, grads):
    """Every step inside one `lax.scan` (the state is the carry: its types must not change)."""

    def body(carry, g):
        p, s = carry
        u, s = tx.update(g, s, p)
        return (gradtx.apply_updates(p, u), s), p

    (p, s), trajectory = jax.jit(lambda p, g: jax.lax.scan(body, (p, tx.init(p)), g))(params, grads)
    return trajectory, p, s


@pytest.mark.parametrize("param_dtype, grad_dtype", list(itertools.product(DTYPES, DTYPES)))
def test_every_dtype_pair_accumulates_inside_scan_as_optax_multisteps(param_dtype, grad_dtype):
    params = {"w": jnp.linspace(-1.0, 1.0, 6, dtype=param_dtype), "b": jnp.ones(2, param_dtype)}
    rng = np.random.default_rng(0)
    grads = {k: jnp.asarray(rng.standard_normal((7, *v.shape)), grad_dtype) for k, v in params.items()}
    ours, final, state = _scan(gradtx.accumulate_gradients(gradtx.sgd(0.5), every_k=3), params, grads)
    theirs, _, _ = _scan(optax.MultiSteps(optax.sgd(0.5), every_k_schedule=3), params, grads)
    tol = 1e-6 if param_dtype == jnp.float32 else 1e-2
    helpers.assert_trees_close(ours, theirs, rtol=tol, atol=tol)
    chex.assert_trees_all_equal_dtypes(final, params)
    assert int(state.count) == 2 and int(state.mini_step) == 1
    chex.assert_trees_all_equal_dtypes(state.accumulator, jax.tree.map(lambda _: jnp.zeros(1), params))


def test_has_updated_the_sum_and_the_skip_hooks_as_optax():
    params = jnp.zeros(3)
    grads = [jnp.array([1.0, 2.0, 3.0]), jnp.array([jnp.nan, 0.0, 1.0]), jnp.ones(3), 2 * jnp.ones(3)]
    for use_mean, skip in itertools.product([True, False], [gradtx.skip_not_finite, None]):
        ours = gradtx.accumulate_gradients(
            gradtx.sgd(1.0), 2, use_grad_mean=use_mean, should_skip_update_fn=skip
        )
        theirs = optax.MultiSteps(
            optax.sgd(1.0), 2, use_grad_mean=use_mean, should_skip_update_fn=skip and optax.skip_not_finite
        )
        s, t = ours.init(params), theirs.init(params)
        # Without a skip hook the NaN is applied at step 2; optax's accumulator keeps it afterwards
        # (its reset multiplies by zero), ours starts again from zero: compare up to there.
        for g in grads if skip is not None else grads[:2]:
            u, s = ours.update(g, s, params)
            v, t = theirs.update(g, t, params)
            np.testing.assert_allclose(u, v)
            assert bool(gradtx.has_updated(s)) == bool(theirs.has_updated(t))
        if skip is None:
            for g in grads[2:]:
                u, s = ours.update(g, s, params)
            np.testing.assert_allclose(u, -1.5 if use_mean else -3.0)  # the NaN did not stick
        else:
            assert int(s.skip_state["num_not_finite"]) == 0 and int(s.count) == 1  # the NaN one was dropped


def test_skip_large_updates_drops_a_large_gradient():
    skip = functools.partial(gradtx.skip_large_updates, max_squared_norm=10.0)
    tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), 1, should_skip_update_fn=skip)
    s = tx.init(jnp.zeros(2))
    u, s = tx.update(jnp.array([3.0, 4.0]), s)
    np.testing.assert_array_equal(u, [0.0, 0.0])
    assert float(s.skip_state["norm_squared"]) == 25.0 and int(s.count) == 0
    u, s = tx.update(jnp.array([1.0, 1.0]), s)
    np.testing.assert_array_equal(u, [-1.0, -1.0])


def test_a_missing_gradient_keeps_its_accumulator_and_the_step_does_not_retrace():
    tx = gradtx.accumulate_gradients(gradtx.momentum(0.1, 0.9), every_k=2)
    params = {"a": jnp.ones(2), "b": jnp.ones(3)}
    state = tx.init(params)
    step = jax.jit(chex.assert_max_traces(lambda g, s: tx.update(g, s, params), n=2))
    _, state = step({"a": jnp.ones(2), "b": jnp.ones(3)}, state)
    u, state2 = step({"a": jnp.ones(2), "b": None}, state)  # b has no gradient this time (a new trace)
    chex.assert_trees_all_equal_structs(state2, state)
    np.testing.assert_array_equal(state2.inner_state[0].momentum["b"], state.inner_state[0].momentum["b"])
    assert u["b"] is None
    _, state3 = step({"a": jnp.ones(2), "b": jnp.ones(3)}, state2)  # and the full tree again: no retrace
    chex.assert_trees_all_equal_structs(state3, state)


def test_the_applied_update_count_saturates_and_accumulation_goes_on():
    tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=2)
    state = tx.init(jnp.zeros(1))._replace(count=jnp.asarray(2**31 - 1, jnp.int32))
    outs = []
    for _ in range(4):
        u, state = tx.update(jnp.ones(1), state)
        outs.append(float(u[0]))
    assert outs == [0.0, -1.0, 0.0, -1.0] and int(state.count) == 2**31 - 1


def _minibatches_growing_to_4(count):
    return jnp.minimum(count + 1, 4)  # 1, 2, 3, 4, 4, ... gradients per update


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("every_k", [3, _minibatches_growing_to_4], ids=["int", "schedule"])
def test_twenty_steps_equal_optax_multisteps_with_an_int_or_a_schedule(every_k, dtype):
    params = {"w": jnp.linspace(-1.0, 1.0, 6, dtype=dtype), "b": jnp.ones(2, dtype)}
    rng = np.random.default_rng(0)
    grads = [
        jax.tree.map(lambda p: jnp.asarray(rng.standard_normal(p.shape), dtype), params) for _ in range(20)
    ]
    ours = gradtx.accumulate_gradients(optax.adam(1e-2), every_k=every_k)
    theirs = optax.MultiSteps(optax.adam(1e-2), every_k_schedule=every_k)
    s, t = ours.init(params), theirs.init(params)
    p, q = params, params
    step = jax.jit(chex.assert_max_traces(ours.update, n=1))
    chex.clear_trace_counter()
    their_step = jax.jit(theirs.update)
    tol = 1e-6 if dtype == jnp.float32 else 8e-3  # bf16: one ulp of |x| <= 1
    applied = 0
    for g in grads:
        u, s = step(g, s, p)
        v, t = their_step(g, t, q)
        p, q = optax.apply_updates(p, u), optax.apply_updates(q, v)
        helpers.assert_trees_close(p, q, rtol=tol, atol=tol)
        assert bool(gradtx.has_updated(s)) == bool(theirs.has_updated(t))
        assert (int(s.count), int(s.mini_step)) == (int(t.gradient_step), int(t.mini_step))
        applied += bool(gradtx.has_updated(s))
    assert applied == 6  # 18 of the 20 gradients: 6 x 3, or 1 + 2 + 3 + 4 + 4 + 4
    helpers.assert_trees_close(s.inner_state, t.inner_opt_state, rtol=tol, atol=tol)
    chex.assert_trees_all_equal_dtypes(p, params)
    chex.assert_trees_all_equal_dtypes(s.accumulator, t.acc_grads)  # float32, as optax's default


def test_the_accumulator_dtype_default_and_override():
    bf16 = {"w": jnp.ones(3, jnp.bfloat16)}
    state = gradtx.accumulate_gradients(gradtx.sgd(0.1), 2).init(bf16)
    assert (
        state.accumulator["w"].dtype
        == jnp.float32
        == optax.MultiSteps(optax.sgd(0.1), 2).init(bf16).acc_grads["w"].dtype
    )
    state = gradtx.accumulate_gradients(gradtx.sgd(0.1), 2, accumulator_dtype=jnp.bfloat16).init(bf16)
    assert state.accumulator["w"].dtype == jnp.bfloat16


def test_a_schedule_is_called_with_the_applied_updates_and_must_return_an_integer():
    seen = []

    def every_k(count):
        seen.append(count)
        return jnp.where(count < 1, 1, 2)

    tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=every_k, use_grad_mean=False)
    s = tx.init(jnp.zeros(1))
    outs = []
    for g in (1.0, 2.0, 3.0, 4.0):
        u, s = tx.update(jnp.array([g]), s)
        outs.append(float(u[0]))
    assert outs == [-1.0, 0.0, -5.0, 0.0] and int(s.count) == 2 and int(s.mini_step) == 1
    assert [int(c) for c in seen] == [0, 1, 1, 2]
    bad = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=lambda count: 2.0)
    with pytest.raises(
        TypeError, match=r"the `every_k` schedule must return an integer scalar, got float32\[\]"
    ):
        bad.update(jnp.ones(1), bad.init(jnp.zeros(1)))


def _renaming():
    """An inner transform whose state changes its key paths at `update` (which no wrapper can keep)."""
    return gradtx.GradientTransformation(
        lambda params: {"a": jnp.zeros(())},
        lambda updates, state, params=None: (updates, {"b": jnp.zeros(())}),
    )


@pytest.mark.parametrize(
    "wrap",
    [lambda tx: gradtx.apply_if_finite(tx, 1), lambda tx: gradtx.accumulate_gradients(tx, 2)],
    ids=["apply_if_finite", "accumulate_gradients"],
)
def test_an_inner_state_that_changes_its_key_paths_is_refused_with_both_trees(wrap):
    tx = wrap(_renaming())
    with pytest.raises(
        gradtx.TreeMismatchError,
        match=r"the inner state given to the step and the inner state the inner transform returned must "
        r"have the same key paths; only in the inner state given to the step: \['a'\]",
    ):
        tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))


@pytest.mark.parametrize("mode", ["vma", "pmap"])
def test_apply_if_finite_around_cross_shard_skips_on_every_replica(mode):
    """A NaN on one replica: the averaged update is NaN everywhere, so every replica skips it."""
    tx = gradtx.apply_if_finite(gradtx.parallel.cross_shard(gradtx.adam(0.1), _util.AXIS), 3)
    data = np.ones((2, _util.N, 3), np.float32)
    data[0, 3, 1] = np.nan  # step 1, replica 3
    params, observed = _util.run(
        tx, jnp.zeros(3), jnp.asarray(data), mode=mode, observe=lambda s: s.total_notfinite
    )
    np.testing.assert_array_equal(observed, 1)  # every replica counted the skipped step, and only it
    np.testing.assert_array_equal(params[:, 0], 0.0)  # step 1 moved no replica
    np.testing.assert_allclose(params[:, 1], -0.1, rtol=1e-6)  # step 2 moved all of them alike


def test_apply_if_finite_skips_bad_steps_and_keeps_the_inner_state():
    tx = gradtx.apply_if_finite(gradtx.momentum(0.1, 0.9), max_consecutive_errors=2)
    state = tx.init(jnp.zeros(2))
    _, state = tx.update(jnp.ones(2), state)
    good_inner = state.inner_state
    u, state = tx.update(jnp.array([jnp.nan, 1.0]), state)
    np.testing.assert_array_equal(u, [0.0, 0.0])
    helpers.assert_trees_close(state.inner_state, good_inner, rtol=0, atol=0)
    assert int(state.notfinite_count) == 1 and not bool(state.last_finite) and int(state.total_notfinite) == 1
    u, state = tx.update(jnp.ones(2), state)
    assert int(state.notfinite_count) == 0 and bool(jnp.all(u != 0))


def test_apply_if_finite_applies_after_too_many_consecutive_errors():
    tx = gradtx.apply_if_finite(gradtx.sgd(1.0), max_consecutive_errors=1)
    state = tx.init(jnp.zeros(1))
    u1, state = tx.update(jnp.array([jnp.inf]), state)
    u2, state = tx.update(jnp.array([jnp.inf]), state)
    assert float(u1[0]) == 0.0 and bool(jnp.isinf(u2[0]))
    assert int(state.total_notfinite) == 2


NAN_STEPS = [1.0, np.nan, np.nan, np.nan, 1.0, np.nan, np.nan, np.nan, np.nan, 1.0, 1.0, np.nan]


@pytest.mark.parametrize(
    "ours, theirs, same_rule",
    [
        (optax.adam(0.1), optax.adam(0.1), True),
        (gradtx.adam(0.1), optax.adam(0.1), False),  # TF's epsilon-hat Adam: other numbers
        (gradtx.sgd(0.1), optax.sgd(0.1), True),
    ],
    ids=["optax_adam", "gradtx_adam", "sgd"],
)
def test_apply_if_finite_counts_as_optax_before_and_after_it_gives_up(ours, theirs, same_rule):
    """Two non-finite steps are skipped, the third applied (poisoning Adam's moments): every counter, and
    with the same inner rule every update and inner state, equal optax's at every step."""
    ours, theirs = gradtx.apply_if_finite(ours, 2), optax.apply_if_finite(theirs, 2)
    p = jnp.zeros(2)
    s, t = ours.init(p), theirs.init(p)
    counts = []
    for x in NAN_STEPS:
        g = jnp.array([x, 1.0])
        u, s = jax.jit(ours.update)(g, s, p)
        v, t = theirs.update(g, t, p)
        fields = ("notfinite_count", "last_finite", "total_notfinite")
        assert [int(getattr(s, f)) for f in fields] == [int(getattr(t, f)) for f in fields]
        assert bool(jnp.all(u == 0)) == bool(jnp.all(v == 0))  # skipped at the same steps
        counts.append(int(s.notfinite_count))
        if same_rule:
            np.testing.assert_allclose(u, v, rtol=1e-6)
            helpers.assert_trees_close(s.inner_state, t.inner_state, rtol=1e-6, atol=0)
    assert counts == [0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 0, 1]
    assert int(s.total_notfinite) == 8 and not bool(s.last_finite)


def test_apply_if_finite_also_skips_an_update_made_non_finite_from_a_finite_state():
    """gradtx's documented addition: a finite gradient whose update is not finite, from a finite inner
    state (a NaN reaching this replica through `cross_shard`'s average), is skipped; optax applies it."""
    blow_up = gradtx.GradientTransformation(
        lambda params: gradtx.EmptyState(), lambda u, state, params=None: (u * jnp.inf, state)
    )
    ours, theirs = gradtx.apply_if_finite(blow_up, 1), optax.apply_if_finite(blow_up, 1)
    s, t = ours.init(jnp.zeros(1)), theirs.init(jnp.zeros(1))
    u, s = ours.update(jnp.ones(1), s)
    v, t = theirs.update(jnp.ones(1), t)
    np.testing.assert_array_equal(u, [0.0])
    assert bool(jnp.isinf(v[0])) and int(t.notfinite_count) == 0
    assert (int(s.notfinite_count), bool(s.last_finite), int(s.total_notfinite)) == (1, False, 1)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 0},
            ValueError,
            r"`accumulate_gradients`: `every_k` must be >= 1, got 0",
        ),
        (
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 2.0},
            TypeError,
            r"`every_k` must be an integer, got 2.0",
        ),
        (
            gradtx.accumulate_gradients,
            {"tx": None, "every_k": 2},
            TypeError,
            r"`accumulate_gradients`: `tx` must be a gradient transformation",
        ),
        (
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 2**40},
            ValueError,
            r"`accumulate_gradients`: `every_k` must be <= 2147483647",
        ),
        (
            gradtx.accumulate_gradients,
            {"tx": gradtx.sgd(0.1), "every_k": 2, "accumulator_dtype": jnp.int32},
            TypeError,
            r"`accumulate_gradients`: `accumulator_dtype` must be None or a floating-point or complex dtype",
        ),
        (
            gradtx.apply_if_finite,
            {"tx": gradtx.sgd(0.1), "max_consecutive_errors": -1},
            ValueError,
            r"`apply_if_finite`: `max_consecutive_errors` must be >= 0, got -1",
        ),
    ],
)
def test_errors(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**kwargs)
