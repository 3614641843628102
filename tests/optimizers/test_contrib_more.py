"""The rest of optax.contrib against optax itself, 20 steps on the same gradients (jitted; eager 5):
`split_real_and_imaginary`, `normalize`, `differentially_private_aggregate` / `dpsgd` (same keys, same
noise), under gradtx's names and `gradtx.optax_compat`'s (gradtx/optax_compat/_contrib_more.py).
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx import optax_compat as ox
from gradtx.optax_compat import contrib
from tests import helpers

REAL = {"w": (4, 3), "b": (5,)}
COMPLEX = {"c": (3, 2), "d": (4,)}
BATCH = 6


def _complex_problem(seed=0, steps=helpers.STEPS):
    """Params and gradients with complex leaves (`c`, `d`) beside real ones (`w`, `b`)."""
    rng = np.random.default_rng(seed)

    def draw(shapes):
        real = {k: rng.standard_normal(s) for k, s in REAL.items()}
        cplx = {k: rng.standard_normal(s) + 1j * rng.standard_normal(s) for k, s in COMPLEX.items()}
        return {
            k: jnp.asarray(v, jnp.complex64 if k in COMPLEX else jnp.float32)
            for k, v in {**real, **cplx}.items()
        }

    return draw(None), [draw(None) for _ in range(steps)]


def _per_example_problem(seed=0, steps=helpers.STEPS):
    """Params and per-example gradients `[BATCH, *shape]` of mixed norms (some clipped, some not)."""
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()}

    def grads():
        scale = rng.uniform(0.05, 3.0, BATCH)
        return {
            k: jnp.asarray(
                rng.standard_normal((BATCH, *s)) * scale.reshape((-1,) + (1,) * len(s)), jnp.float32
            )
            for k, s in REAL.items()
        }

    return params, [grads() for _ in range(steps)]


def _real_problem(seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()}
    return params, [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in REAL.items()} for _ in range(steps)
    ]


def _galore_problem(seed=0, steps=helpers.STEPS):
    """Matrices taller and wider than the rank, a 3-D tensor and a vector (never projected)."""
    rng = np.random.default_rng(seed)
    shapes = {"w": (6, 4), "v": (3, 7), "t": (4, 2, 3), "b": (5,)}

    def draw():
        return {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}

    return draw(), [draw() for _ in range(steps)]


def _dims(cls):
    """Dimension numbers: `w` as it is, `v` left whole, `t`'s axes 0 and 2 as the rows."""
    return {"w": cls(), "v": None, "t": cls((0, 2), 1), "b": None}


GALORE_MASK = {"w": True, "v": False, "t": True, "b": False}


def _real_view(tree):
    """Each complex leaf as its `[real, imag]` stack (the comparison helpers compare real numbers)."""
    return jax.tree.map(lambda x: np.stack([np.real(x), np.imag(x)]) if np.iscomplexobj(x) else x, tree)


def _decaying(count):
    return 0.1 * 0.9**count


CASES = {
    "split_real_and_imaginary-adam": (
        _complex_problem,
        lambda: gradtx.split_real_and_imaginary(ox.adam(0.05)),
        lambda: optax.contrib.split_real_and_imaginary(optax.adam(0.05)),
    ),
    "split_real_and_imaginary-compat-momentum-schedule": (
        _complex_problem,
        lambda: contrib.split_real_and_imaginary(ox.sgd(_decaying, momentum=0.9, nesterov=True)),
        lambda: optax.contrib.split_real_and_imaginary(optax.sgd(_decaying, momentum=0.9, nesterov=True)),
    ),
    "normalize-sgd": (
        _real_problem,
        lambda: gradtx.chain(gradtx.normalize(), ox.sgd(0.1)),
        lambda: optax.chain(optax.contrib.normalize(), optax.sgd(0.1)),
    ),
    "normalize-compat-complex": (
        _complex_problem,
        lambda: ox.chain(contrib.normalize(), ox.sgd(0.1)),
        lambda: optax.chain(optax.contrib.normalize(), optax.sgd(0.1)),
    ),
    "differentially_private_aggregate": (
        _per_example_problem,
        lambda: gradtx.chain(
            gradtx.differentially_private_aggregate(1.0, 0.5, key=jax.random.key(3)), ox.sgd(0.1)
        ),
        lambda: optax.chain(
            optax.contrib.differentially_private_aggregate(1.0, 0.5, key=jax.random.key(3)), optax.sgd(0.1)
        ),
    ),
    "differentially_private_aggregate-compat-int-key": (
        _per_example_problem,
        lambda: ox.chain(contrib.differentially_private_aggregate(0.3, 1.5, 11), ox.sgd(0.1)),
        lambda: optax.chain(optax.contrib.differentially_private_aggregate(0.3, 1.5, 11), optax.sgd(0.1)),
    ),
    "dpsgd": (
        _per_example_problem,
        lambda: contrib.dpsgd(0.1, 1.0, 0.5, seed=5),
        lambda: optax.contrib.dpsgd(0.1, 1.0, 0.5, seed=5),
    ),
    "dpsgd-nesterov-momentum": (
        _per_example_problem,
        lambda: contrib.dpsgd(_decaying, 2.0, 0.8, seed=1, momentum=0.9, nesterov=True),
        lambda: optax.contrib.dpsgd(_decaying, 2.0, 0.8, seed=1, momentum=0.9, nesterov=True),
    ),
    "galore": (
        _galore_problem,
        lambda: gradtx.galore(0.05, rank=2, update_proj_gap=5),
        lambda: optax.contrib.galore(0.05, rank=2, update_proj_gap=5),
    ),
    "galore-compat-lion-dims-decay-mask": (
        _galore_problem,
        lambda: contrib.galore(
            _decaying, 3, 3, 0.5, ox.scale_by_lion(), 0.1, GALORE_MASK, _dims(contrib.GaLoreDimensionNumbers)
        ),
        lambda: optax.contrib.galore(
            _decaying,
            3,
            3,
            0.5,
            optax.scale_by_lion(),
            0.1,
            GALORE_MASK,
            _dims(optax.contrib.GaLoreDimensionNumbers),
        ),
    ),
    "scale_by_galore-compat": (
        _galore_problem,
        lambda: ox.chain(contrib.scale_by_galore(rank=2, update_proj_gap=4), ox.sgd(0.05)),
        lambda: optax.chain(optax.contrib.scale_by_galore(rank=2, update_proj_gap=4), optax.sgd(0.05)),
    ),
    "schedule_free": (
        _real_problem,
        lambda: gradtx.schedule_free(ox.sgd(0.1), 0.1),
        lambda: optax.contrib.schedule_free(optax.sgd(0.1), 0.1),
    ),
    "schedule_free-compat-adam-schedule-bf16-z": (
        _real_problem,
        lambda: contrib.schedule_free(ox.adam(_decaying, b1=0.0), _decaying, 0.8, 1.0, jnp.bfloat16),
        lambda: optax.contrib.schedule_free(optax.adam(_decaying, b1=0.0), _decaying, 0.8, 1.0, jnp.bfloat16),
    ),
    "schedule_free_sgd-compat": (_real_problem, contrib.schedule_free_sgd, optax.contrib.schedule_free_sgd),
    "schedule_free_sgd-compat-warmup-decay": (
        _real_problem,
        lambda: contrib.schedule_free_sgd(0.5, 5, 0.8, 0.01, 1.5),
        lambda: optax.contrib.schedule_free_sgd(0.5, 5, 0.8, 0.01, 1.5),
    ),
    "schedule_free_adamw-compat": (
        _real_problem,
        contrib.schedule_free_adamw,
        optax.contrib.schedule_free_adamw,
    ),
    "schedule_free_adamw-compat-warmup": (
        _real_problem,
        lambda: contrib.schedule_free_adamw(0.05, 4, 0.8, 0.99, 1e-6, 0.01, 1.5),
        lambda: optax.contrib.schedule_free_adamw(0.05, 4, 0.8, 0.99, 1e-6, 0.01, 1.5),
    ),
}


def _optax(make):
    with warnings.catch_warnings():  # optax's dpsgd passes the deprecated `seed` on itself
        warnings.simplefilter("ignore", DeprecationWarning)
        return make()


def _trajectory(tx, params, grads):
    """The params after each of the steps on `grads` (stacked on a leading axis) and the last state."""

    def step(carry, g):
        p, state = carry
        u, state = tx.update(g, state, p)
        p = gradtx.apply_updates(p, u)
        return (p, state), p

    (_, state), trajectory = jax.lax.scan(step, (params, tx.init(params)), grads)
    return trajectory, state


@functools.cache
def _jitted_runs():
    """Every case's 20 steps, gradtx's and optax's, in one compiled program (one compilation for all)."""
    problems = {name: problem() for name, (problem, _, _) in CASES.items()}
    stacked = {
        name: (p, jax.tree.map(lambda *g: jnp.stack(g), *grads)) for name, (p, grads) in problems.items()
    }

    @jax.jit
    def run_all(stacked):
        out = {}
        for name, (_, ours, theirs) in CASES.items():
            params, grads = stacked[name]
            out[name] = (_trajectory(ours(), params, grads), _trajectory(_optax(theirs), params, grads))
        return out

    return run_all(stacked)


def _compare(name, actual, state, expected, expected_state):
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(
            _real_view(a), _real_view(e), rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}"
        )
    if name.startswith("schedule_free"):  # the params to evaluate at, from the last state
        evaluate = contrib.schedule_free_eval_params if "compat" in name else gradtx.schedule_free_eval_params
        helpers.assert_trees_close(
            evaluate(state, actual[-1]),
            optax.contrib.schedule_free_eval_params(expected_state, expected[-1]),
            rtol=1e-6,
            atol=1e-6,
            msg=f"{name}: eval params",
        )
    if name in ("galore", "schedule_free"):
        return  # gradtx's own names keep gradtx's state classes (same numbers)
    # the state reads as optax's: same structure, same values (keys compared as their data)
    unwrap = gradtx.tree.unwrap_random_key_data
    assert str(jax.tree.structure(unwrap(state))) == str(jax.tree.structure(unwrap(expected_state))), name
    helpers.assert_trees_close(
        _real_view(unwrap(state)), _real_view(unwrap(expected_state)), rtol=1e-6, atol=1e-6, msg=name
    )


def _unstack(tree):
    """A trajectory stacked on a leading axis as the list of its steps."""
    return [jax.tree.map(lambda x, t=t: x[t], tree) for t in range(helpers.STEPS)]


@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax_jitted(name):
    (ours, state), (theirs, their_state) = _jitted_runs()[name]
    _compare(name, _unstack(ours), state, _unstack(theirs), their_state)


EAGER = [
    "split_real_and_imaginary-adam",
    "normalize-compat-complex",
    "differentially_private_aggregate",
    "dpsgd-nesterov-momentum",
    "galore-compat-lion-dims-decay-mask",
    "schedule_free-compat-adam-schedule-bf16-z",
    "schedule_free_adamw-compat-warmup",
]


@pytest.mark.parametrize("name", EAGER)
def test_five_steps_equal_optax_eagerly(name):
    """Op by op (one case per family; jit and eager agree for every entry: test_contract's own test)."""
    problem, ours, theirs = CASES[name]
    params, grads = problem(steps=5)
    actual, state = helpers.run(ours(), params, grads)
    expected, expected_state = helpers.run(_optax(theirs), params, grads)
    _compare(name, actual, state, expected, expected_state)


def test_compat_states_are_optax_layouts():
    params = _complex_problem(steps=0)[0]
    state = contrib.split_real_and_imaginary(ox.adam(0.1)).init(params)
    assert type(state).__name__ == "SplitRealAndImaginaryState" and state.inner_state[0].mu[
        "c"
    ].real.shape == (3, 2)
    assert contrib.NormalizeState() == ox.EmptyState() == contrib.normalize().init(params)
    dp = contrib.differentially_private_aggregate(1.0, 0.5, key=jax.random.key(0)).init(params)
    assert isinstance(dp, contrib.DifferentiallyPrivateAggregateState) and dp._fields == ("rng_key",)
    assert jax.random.key_data(dp.rng_key).tolist() == jax.random.key_data(jax.random.key(0)).tolist()


def test_compat_dp_key_arguments_follow_optax():
    with pytest.warns(UserWarning, match="Specifying a key"):
        state = contrib.differentially_private_aggregate(1.0, 0.5).init(None)
    assert jax.random.key_data(state.rng_key).tolist() == jax.random.key_data(jax.random.key(0)).tolist()
    with pytest.warns(DeprecationWarning, match="seed"):
        state = contrib.differentially_private_aggregate(1.0, 0.5, seed=4).init(None)
    assert jax.random.key_data(state.rng_key).tolist() == jax.random.key_data(jax.random.key(4)).tolist()
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="only one of `seed` and `key`"):
        contrib.differentially_private_aggregate(1.0, 0.5, key=1, seed=4)


def test_bad_arguments_are_refused_at_construction():
    with pytest.raises(TypeError, match="`split_real_and_imaginary`: `inner`"):
        gradtx.split_real_and_imaginary(0.1)
    with pytest.raises(TypeError, match="`differentially_private_aggregate`: `key` must be a typed PRNG key"):
        gradtx.differentially_private_aggregate(1.0, 0.5, key=3)
    with pytest.raises(TypeError, match="with `key`, `l2_norm_clip` must be a number or an array"):
        gradtx.differentially_private_aggregate(_decaying, 0.5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`differentially_private_aggregate`: `noise_multiplier`"):
        gradtx.differentially_private_aggregate(1.0, -0.5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`dpsgd`: `noise_multiplier`"):
        contrib.dpsgd(0.1, 1.0, -0.5, seed=0)
    with pytest.raises(ValueError, match="`galore`: `rank` must be"):
        gradtx.galore(0.1, rank=0)
    with pytest.raises(TypeError, match="`scale_by_galore`: `rank` must be"):
        contrib.scale_by_galore(rank=2.5)
    with pytest.raises(ValueError, match="`galore`: `update_proj_gap` must be"):
        contrib.galore(0.1, update_proj_gap=0)
    with pytest.raises(TypeError, match="`scale_by_galore`: `base_optimizer`"):
        gradtx.scale_by_galore(base_optimizer="adam")
    with pytest.raises(TypeError, match="`scale_by_galore`: `weight_dimension_numbers` must be None"):
        gradtx.scale_by_galore(weight_dimension_numbers=3)
    bad_dims = gradtx.scale_by_galore(weight_dimension_numbers=gradtx.GaLoreDimensionNumbers(0, 0))
    with pytest.raises(
        ValueError, match=r"must split the axes of shape \(4, 2, 3\) into two disjoint groups"
    ):
        bad_dims.init(_galore_problem(steps=0)[0])
    with pytest.raises(TypeError, match="`schedule_free`: `tx`"):
        gradtx.schedule_free("sgd", 0.1)
    with pytest.raises(ValueError, match="`schedule_free`: `b1`"):
        contrib.schedule_free(ox.sgd(0.1), 0.1, b1=0.0)
    with pytest.raises(TypeError, match="`schedule_free`: `state_dtype`"):
        contrib.schedule_free(ox.sgd(0.1), 0.1, state_dtype=jnp.int32)


def test_split_keeps_real_leaves_and_steps_each_part_on_its_own():
    """sign_sgd on the split parts steps each of the real and imaginary parts by -lr sign."""
    params = {"c": jnp.array([1.0 + 1.0j, -2.0j]), "r": jnp.array([3.0])}
    grads = {"c": jnp.array([2.0 - 0.5j, -1.0 + 4.0j], jnp.complex64), "r": jnp.array([-7.0])}
    tx = gradtx.split_real_and_imaginary(gradtx.sign_sgd(0.5))
    out, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_array_equal(out["c"], np.array([-0.5 + 0.5j, 0.5 - 0.5j], np.complex64))
    np.testing.assert_array_equal(out["r"], np.array([0.5], np.float32))
    assert out["c"].dtype == jnp.complex64 and out["r"].dtype == jnp.float32
