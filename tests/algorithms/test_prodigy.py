"""gradtx/_algorithms/prodigy.py: Prodigy against optax.contrib's, 20 steps on the same gradients, its
distance estimate (and D-Adapted AdamW's, built on Prodigy's step: test_dadapt.py), its errors, and its
numbers under ZeRO-1's sharded state.

The gradients have a constant part (a bias) under the noise, so that the params travel and the distance
estimates grow. Each case runs gradtx's optimizer and optax's (jitted, 20 steps: every case of this file one
compiled program; eagerly, 5), and `gradtx.optax_compat`'s alias, whose state must equal optax's field by
field.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.optax_compat import _table_contrib as ox
from tests import helpers
from tests.algorithms import _shared

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}


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
}
EXTRA = {}  # no case takes extra arguments of `update` (Polyak's loss values: test_polyak.py)
# D-Adapted AdamW's default run, whose distance estimate test_the_distance_estimates_grow checks beside
# Prodigy's (its comparison with optax: test_dadapt.py)
DADAPT_ADAMW = {"dadapt_adamw": (gradtx.dadapt_adamw, ox.dadapt_adamw, optax.contrib.dadapt_adamw)}


@functools.cache
def _runs() -> dict:
    """Every case's 20 steps, gradtx's, optax_compat's and optax's, compiled as one program:
    `{name: (gradtx's trajectory, compat's state, optax's trajectory, optax's state)}`."""
    return _shared.lr_free_runs({**CASES, **DADAPT_ADAMW}, _problem_for, EXTRA)


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


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: gradtx.prodigy(b1=1.0), r"`prodigy`: `b1` must be in \[0.0, 1.0\), got 1.0"),
        (lambda: gradtx.prodigy(b3=1.5), r"`prodigy`: `b3` must be in \[0.0, 1.0\], got 1.5"),
        (lambda: gradtx.prodigy(estim_lr0=0.0), r"`prodigy`: `estim_lr0` must be > 0, got 0.0"),
        (lambda: gradtx.prodigy(learning_rate=-1.0), r"`prodigy`: `learning_rate` must be >= 0, got -1.0"),
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
    ],
)
def test_bad_types_are_refused_at_construction(make, match):
    with pytest.raises(TypeError, match=match):
        make()
