"""Prodigy, D-Adapted AdamW, Mechanic, COCOB, DoG, DoWG and Polyak SGD against optax, 20 steps on the same
gradients (gradtx/optimizers/_lr_free.py, gradtx/transforms/_prodigy.py, _cocob.py, _dog.py, _polyak.py,
gradtx/combinators/_mechanic.py).

The gradients have a constant part (a bias) under the noise, so that the params travel and the
distance estimates grow (with pure noise Prodigy's estimate stays at `estim_lr0`). Each case runs
gradtx's optimizer and optax's (jitted, 20 steps; eagerly, 5), and `gradtx.optax_compat`'s alias,
whose state must equal optax's field by field.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx import optax_compat
from gradtx.optax_compat import _table_contrib as ox
from gradtx.optax_compat import _table_contrib as oxd
from tests import helpers

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
MASK = {"w": True, "b": False, "s": True}


def _problem(steps=helpers.STEPS, shapes=SHAPES):
    rng = np.random.default_rng(0)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    bias = {k: rng.standard_normal(s) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(bias[k] + 0.3 * rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
        for _ in range(steps)
    ]
    return params, grads


def _problem_for(name, steps=helpers.STEPS):
    if name.split("-")[0] in NO_SCALARS:
        return _problem(steps, {k: s for k, s in SHAPES.items() if s})
    return _problem(steps)


def _decaying(count):
    return 1.0 - 0.03 * count


# name: (gradtx's, optax_compat's, optax's)
CASES = {
    "prodigy": (gradtx.prodigy, ox.prodigy, optax.contrib.prodigy),
    "prodigy-schedule-wd-safeguard": (
        lambda: gradtx.prodigy(_decaying, 0.8, 0.99, 0.9, 1e-6, 1e-4, 2.0, 0.1, safeguard_warmup=True),
        lambda: ox.prodigy(_decaying, (0.8, 0.99), 0.9, 1e-6, 1e-4, 2.0, 0.1, True),
        lambda: optax.contrib.prodigy(_decaying, (0.8, 0.99), 0.9, 1e-6, 1e-4, 2.0, 0.1, True),
    ),
    "dadapt_adamw": (gradtx.dadapt_adamw, ox.dadapt_adamw, optax.contrib.dadapt_adamw),
    "dadapt_adamw-schedule-wd": (
        lambda: gradtx.dadapt_adamw(_decaying, 0.8, 0.99, 1e-6, 1e-4, 0.1),
        lambda: ox.dadapt_adamw(_decaying, (0.8, 0.99), 1e-6, 1e-4, 0.1),
        lambda: optax.contrib.dadapt_adamw(_decaying, (0.8, 0.99), 1e-6, 1e-4, 0.1),
    ),
    "mechanize": (
        lambda: gradtx.mechanize(gradtx.optax_compat.adam(1.0)),
        lambda: ox.mechanize(gradtx.optax_compat.adam(1.0)),
        lambda: optax.contrib.mechanize(optax.adam(1.0)),
    ),
    "mechanize-sgd-schedule-args": (
        lambda: gradtx.mechanize(gradtx.optax_compat.sgd(_decaying, 0.9), 0.1, 1e-6, 1e-4, 3),
        lambda: ox.mechanize(gradtx.optax_compat.sgd(_decaying, 0.9), 0.1, 1e-6, 1e-4, 3),
        lambda: optax.contrib.mechanize(optax.sgd(_decaying, 0.9), 0.1, 1e-6, 1e-4, 3),
    ),
    "cocob": (gradtx.cocob, ox.cocob, optax.contrib.cocob),
    "cocob-schedule-wd-mask": (
        lambda: gradtx.cocob(_decaying, 50.0, 1e-6, 0.1, mask=MASK),
        lambda: ox.cocob(_decaying, 50.0, 1e-6, 0.1, MASK),
        lambda: optax.contrib.cocob(_decaying, 50.0, 1e-6, 0.1, MASK),
    ),
    "dog": (gradtx.dog, oxd.dog, optax.contrib.dog),
    "dog-first-rate-schedule-wd-mask": (
        lambda: gradtx.dog(_decaying, ("learning_rate", 0.05), 1e-6, 0.1, mask=MASK),
        lambda: oxd.dog(_decaying, ("learning_rate", 0.05), 1e-6, 0.1, MASK),
        lambda: optax.contrib.dog(_decaying, ("learning_rate", 0.05), 1e-6, 0.1, MASK),
    ),
    "dog-distance": (
        lambda: gradtx.dog(init_step=("distance", 0.1)),
        lambda: oxd.dog(init_step=("distance", 0.1)),
        lambda: optax.contrib.dog(init_step=("distance", 0.1)),
    ),
    "dowg": (gradtx.dowg, oxd.dowg, optax.contrib.dowg),
    "dowg-guess-schedule-wd-mask": (
        lambda: gradtx.dowg(_decaying, 0.5, 1e-6, 0.1, mask=MASK),
        lambda: oxd.dowg(_decaying, 0.5, 1e-6, 0.1, MASK),
        lambda: optax.contrib.dowg(_decaying, 0.5, 1e-6, 0.1, MASK),
    ),
    "ldog": (
        lambda: gradtx.chain(gradtx.scale_by_distance_over_gradients(), gradtx.scale_by_learning_rate(1.0)),
        lambda: gradtx.chain(
            optax_compat.scale_by_distance_over_gradients(), gradtx.scale_by_learning_rate(1.0)
        ),
        lambda: optax.chain(optax.scale_by_distance_over_gradients(), optax.scale_by_learning_rate(1.0)),
    ),
    "ldog-descent-args": (
        lambda: gradtx.scale_by_distance_over_gradients(1e-3, 1e-6, -0.5, param_dtype=None),
        lambda: optax_compat.scale_by_distance_over_gradients(1e-3, 1e-6, None, -0.5),
        lambda: optax.scale_by_distance_over_gradients(1e-3, 1e-6, None, -0.5),
    ),
    "polyak_sgd": (gradtx.polyak_sgd, gradtx.optax_compat.polyak_sgd, optax.polyak_sgd),
    "polyak_sgd-capped-schedule-sps+": (
        lambda: gradtx.polyak_sgd(0.02, _decaying, 1.0, 1e-3, "sps+"),
        lambda: gradtx.optax_compat.polyak_sgd(0.02, _decaying, 1.0, 1e-3, "sps+"),
        lambda: optax.polyak_sgd(0.02, _decaying, 1.0, 1e-3, "sps+"),
    ),
}
NO_SCALARS = {
    "ldog"
}  # optax 0.2.8 turns a 0-d leaf's update into shape [1]: see test_layer_wise_dog_keeps_0d
# the loss values Polyak's step reads: below f_min = 1 at some steps (sps+ then stands still)
EXTRA = {"polyak_sgd": [{"value": np.float32(v)} for v in np.linspace(3.0, 0.2, helpers.STEPS)]}


def _scanned(tx, params, grads, extra):
    """`(params after each step, last state)` of `tx` over the stacked gradients, in one `lax.scan`."""

    def body(carry, xs):
        p, state = carry
        g, e = xs
        u, state = tx.update(g, state, p, **e)
        p = gradtx.apply_updates(p, u)
        return (p, state), p

    (_, state), trajectory = jax.lax.scan(body, (params, tx.init(params)), (grads, extra))
    return trajectory, state


@functools.cache
def _runs() -> dict:
    """Every case's 20 steps, gradtx's, optax_compat's and optax's, compiled as one program (one compilation
    for the whole table): `{name: (gradtx's trajectory, compat's state, optax's trajectory, optax's state)}`.
    """
    problems = {name: _problem_for(name) for name in CASES}

    def everything():
        out = {}
        for name, (ours, compat, theirs) in CASES.items():
            params, grads = problems[name]
            stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *grads)
            extra = EXTRA.get(name.split("-")[0])
            extra = {} if extra is None else jax.tree.map(lambda *xs: jnp.stack(xs), *extra)
            actual, _ = _scanned(ours(), params, stacked, extra)
            _, compat_state = _scanned(compat(), params, stacked, extra)
            expected, optax_state = _scanned(theirs(), params, stacked, extra)
            out[name] = (actual, compat_state, expected, optax_state)
        return out

    return jax.tree.map(np.asarray, jax.jit(everything)())


@pytest.mark.parametrize("name", CASES)
def test_twenty_jitted_steps_and_the_compat_state_equal_optax(name):
    actual, compat_state, expected, optax_state = _runs()[name]
    for t in range(helpers.STEPS):
        at = jax.tree.map(lambda x, t=t: x[t], (actual, expected))
        helpers.assert_trees_close(at[0], at[1], rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")
    layout = str(jax.tree.structure(compat_state))  # the state classes' names and fields
    assert layout == str(jax.tree.structure(optax_state)), name
    helpers.assert_trees_close(compat_state, optax_state, rtol=1e-6, atol=1e-6, msg=f"{name}: state")


@pytest.mark.parametrize("name", [n for n in CASES if "-" not in n])
def test_five_eager_steps_equal_optax(name):
    """gradtx's optimizer stepped eagerly (op by op) against optax's jitted steps."""
    ours, _, _ = CASES[name]
    params, grads = _problem_for(name, steps=5)
    extra = EXTRA[name][:5] if name in EXTRA else None
    actual, _ = helpers.run(ours(), params, grads, extra_args_seq=extra)
    expected = _runs()[name][2]
    for t, a in enumerate(actual):
        e = jax.tree.map(lambda x, t=t: x[t], expected)
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"{name}: eager step {t + 1}")


def test_the_distance_estimates_grow():
    """Not a no-op comparison: on the biased gradients both estimates leave `estim_lr0` behind."""
    for name in ("prodigy", "dadapt_adamw"):
        assert float(_runs()[name][3].estim_lr) > 100 * 1e-6, name


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: gradtx.prodigy(b1=1.0), r"`prodigy`: `b1` must be in \[0.0, 1.0\), got 1.0"),
        (lambda: gradtx.prodigy(b3=1.5), r"`prodigy`: `b3` must be in \[0.0, 1.0\], got 1.5"),
        (lambda: gradtx.prodigy(estim_lr0=0.0), r"`prodigy`: `estim_lr0` must be > 0, got 0.0"),
        (lambda: gradtx.prodigy(learning_rate=-1.0), r"`prodigy`: `learning_rate` must be >= 0, got -1.0"),
        (lambda: gradtx.dadapt_adamw(weight_decay=-0.1), r"`dadapt_adamw`: `weight_decay` must be >= 0"),
        (lambda: ox.dadapt_adamw(betas=(0.9, 1.5)), r"`dadapt_adamw`: `b2` must be in \[0.0, 1.0\)"),
        (
            lambda: gradtx.mechanize(gradtx.sgd(1.0), num_betas=0),
            r"`mechanize`: `num_betas` must be >= 1, got 0",
        ),
        (lambda: ox.mechanize(gradtx.sgd(1.0), eps=0.0), r"`mechanize`: `eps` must be > 0, got 0.0"),
        (lambda: gradtx.cocob(alpha=0.0), r"`cocob`: `alpha` must be > 0, got 0.0"),
        (lambda: ox.scale_by_cocob(eps=-1.0), r"`scale_by_cocob`: `eps` must be > 0, got -1.0"),
        (lambda: gradtx.dog(init_step=("far", 1.0)), r"`dog`: `init_step\[0\]` must be one of .*'heuristic'"),
        (lambda: oxd.dog(init_step=("distance", -1.0)), r"`dog`: `init_step\[1\]` must be >= 0, got -1.0"),
        (lambda: gradtx.dowg(init_estim_sq_dist=-1.0), r"`dowg`: `init_estim_sq_dist` must be >= 0"),
        (lambda: gradtx.scale_by_distance_over_gradients(0.0), r"`reps_rel` must be > 0, got 0.0"),
        (lambda: gradtx.polyak_sgd(variant="sps++"), r"`polyak_sgd`: `variant` must be one of"),
        (lambda: gradtx.optax_compat.polyak_sgd(scaling=-1.0), r"`polyak_sgd`: `scaling` must be >= 0"),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: gradtx.prodigy(safeguard_warmup=1),
            r"`prodigy`: `safeguard_warmup` must be True or False, got 1",
        ),
        (lambda: gradtx.dog(init_step=1e-6), r"`dog`: `init_step` must be a pair \(kind, value\)"),
        (lambda: gradtx.dowg(eps=lambda c: 1e-4), r"`dowg`: `eps` must be a number or a scalar array"),
        (lambda: gradtx.mechanize(lambda g: g), r"`mechanize`: `tx` must be"),
    ],
)
def test_bad_types_are_refused_at_construction(make, match):
    with pytest.raises(TypeError, match=match):
        make()


def test_polyak_needs_the_loss_value():
    tx = gradtx.polyak_sgd()
    with pytest.raises(
        gradtx.MissingExtraArgError, match=r"`polyak_sgd`: `update` needs the extra argument `value`"
    ):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)), jnp.zeros(2))


def test_layer_wise_dog_keeps_0d_leaves_0d_with_optax_values():
    params, grads = _problem(steps=3)
    expected, _ = helpers.run(optax.scale_by_distance_over_gradients(global_scale=-1.0), params, grads)
    actual, _ = helpers.run(gradtx.scale_by_distance_over_gradients(global_scale=-1.0), params, grads)
    assert actual[-1]["s"].shape == () and expected[-1]["s"].shape == (1,)  # optax's reshape
    for a, e in zip(actual, expected, strict=True):
        helpers.assert_trees_close(jax.tree.map(np.ravel, a), jax.tree.map(np.ravel, e), rtol=1e-6, atol=1e-6)


def test_dog_heuristic_start_reads_the_params_norm_and_is_leaf_wise():
    params = {"a": jnp.array([3.0]), "b": jnp.array([[4.0]])}
    tx = gradtx.scale_by_dog(("heuristic", 0.1))
    np.testing.assert_allclose(tx.init(params).max_dist, 0.1 * (1 + 5.0), rtol=1e-6)
    assert not isinstance(tx, gradtx.ElementWise)  # ZeRO's slices would see part of the norm
    assert isinstance(gradtx.scale_by_dog(("distance", 0.1)), gradtx.ElementWise)


def test_zero_sharded_state_gives_the_unsharded_numbers():
    """Under `sharded_state` (ZeRO-1, shard_map) each replica holds a zero-padded slice of every leaf: the
    rules' sums over all elements (through `_sliced.total`) are one scalar all-reduce each, and the steps and
    the distance estimates equal the single-device run's."""
    from tests.parallel import test_sharded_reductions as zero

    rng = np.random.default_rng(1)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in zero.SHAPES.items()}
    bias = {k: rng.standard_normal(s) for k, s in zero.SHAPES.items()}
    grads = {
        k: (bias[k] + 0.3 * rng.standard_normal((zero.T, zero.N, *s))).astype(np.float32)
        for k, s in zero.SHAPES.items()
    }
    tx = gradtx.prodigy(weight_decay=0.01)

    def observe(state):
        return state.estim_lr, state.numerator_weighted

    ref_params, ref_obs = zero._unsharded(tx, params, grads, observe)
    got_params, got_obs = zero._sharded(
        gradtx.parallel.sharded_state(tx, "i"), params, grads, "novma", observe
    )
    assert float(ref_obs[0][-1]) > 100 * 1e-6  # the estimate grew
    zero._assert_all_replicas(got_params, ref_params)
    for got, ref in zip(got_obs, ref_obs, strict=True):  # each replica's copy of the scalars: [N, T, 1]
        np.testing.assert_allclose(got[..., 0], np.broadcast_to(ref, got.shape[:-1]), rtol=1e-5)
