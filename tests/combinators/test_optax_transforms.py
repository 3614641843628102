"""gradtx/combinators/_centralize.py, _normalize_update.py, _block_scaling.py, _unitwise.py and
_per_example.py: centralize, normalize_by_update_norm, scale_by_param_block_norm, unitwise_norm /
unitwise_clip and per_example_layer_norm_clip against optax's own (the gradtx.optax_compat names are these
functions).

Every chain runs 20 steps in one jitted program beside optax's (same gradients, Python-float
hyperparameters, rtol/atol 1e-6), and 5 steps eagerly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as compat
from gradtx import combinators as _transforms_more
from tests import helpers

SHAPES = {"w": (6, 4), "c": (3, 2, 2, 4), "b": (5,), "s": ()}


def _problem(seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    params["z"] = jnp.zeros((2, 3))  # a zero block: block norms at `min_scale`
    grads = [
        {k: jnp.asarray(rng.standard_normal(np.shape(p)), jnp.float32) for k, p in params.items()}
        for _ in range(steps)
    ]
    return params, grads


def _sgd(tx, lib):
    return lib.chain(tx, lib.scale(-0.1))


CASES = {
    "centralize": (lambda: _sgd(compat.centralize(), gradtx), lambda: _sgd(optax.centralize(), optax)),
    "normalize_by_update_norm": (
        lambda: _sgd(compat.normalize_by_update_norm(), gradtx),
        lambda: _sgd(optax.normalize_by_update_norm(), optax),
    ),
    "normalize_by_update_norm-descent": (
        lambda: compat.normalize_by_update_norm(scale_factor=-0.5, eps=1e-3),
        lambda: optax.normalize_by_update_norm(scale_factor=-0.5, eps=1e-3),
    ),
    "scale_by_param_block_norm": (
        lambda: _sgd(compat.scale_by_param_block_norm(), gradtx),
        lambda: _sgd(optax.scale_by_param_block_norm(), optax),
    ),
    "scale_by_param_block_norm-min_scale": (
        lambda: _sgd(compat.scale_by_param_block_norm(0.5), gradtx),
        lambda: _sgd(optax.scale_by_param_block_norm(0.5), optax),
    ),
}


def _trajectory(tx, params, grads):
    def step(carry, g):
        p, s = carry
        u, s = tx.update(g, s, p)
        p = optax.apply_updates(p, u)
        return (p, s), p

    return jax.lax.scan(step, (params, tx.init(params)), grads)[1]


def test_twenty_jitted_steps_equal_optax():
    params, grads = _problem()
    stacked = jax.tree.map(lambda *g: jnp.stack(g), *grads)
    pairs = {name: (ours(), theirs()) for name, (ours, theirs) in CASES.items()}
    out = jax.jit(
        lambda p, g: {n: (_trajectory(a, p, g), _trajectory(b, p, g)) for n, (a, b) in pairs.items()}
    )(params, stacked)
    for name, (actual, expected) in out.items():
        helpers.assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6, msg=name)
        assert not np.allclose(actual["w"][-1], params["w"]), f"{name}: nothing moved"


@pytest.mark.parametrize("name", ["centralize", "normalize_by_update_norm", "scale_by_param_block_norm"])
def test_five_eager_steps_equal_optax(name):
    ours, theirs = CASES[name]
    params, grads = _problem(steps=5)
    actual, _ = helpers.run(ours(), params, grads)
    expected, _ = helpers.run(theirs(), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")


def test_centralize_gives_each_leading_slice_zero_mean_and_keeps_vectors():
    params, grads = _problem(steps=1)
    tx = gradtx.centralize()
    out, state = tx.update(grads[0], tx.init(params))
    assert state == gradtx.EmptyState()
    for k in ("w", "c", "z"):
        means = np.asarray(out[k]).reshape(out[k].shape[0], -1).mean(axis=1)
        np.testing.assert_allclose(means, 0.0, atol=1e-6, err_msg=k)
    np.testing.assert_array_equal(out["b"], grads[0]["b"])
    np.testing.assert_array_equal(out["s"], grads[0]["s"])


def test_normalize_by_update_norm_steps_have_the_scale_factors_norm():
    _, grads = _problem(steps=1)
    tx = gradtx.normalize_by_update_norm(scale_factor=2.5, eps=0.0)
    out, _ = tx.update(grads[0], tx.init(None))
    np.testing.assert_allclose(gradtx.global_norm(out), 2.5, rtol=1e-6)
    scheduled = gradtx.normalize_by_update_norm(lambda count: 1.0 + count, eps=0.0)
    state = scheduled.init(None)
    for want in (1.0, 2.0):
        out, state = scheduled.update(grads[0], state)
        np.testing.assert_allclose(gradtx.global_norm(out), want, rtol=1e-6)
    assert int(state.count) == 2


UNITS = [((5,), None), ((1, 5), None), ((4, 3), None), ((2, 3, 4), None), ((2, 2, 3, 4), None),
         ((2, 2, 2, 3, 2), None), ((4, 3), 1), ((2, 3, 4), (0, 2))]  # fmt: skip


def test_unitwise_norm_and_clip_equal_optax_for_every_rank():
    rng = np.random.default_rng(1)
    grads = [jnp.asarray(3 * rng.standard_normal(shape), jnp.float32) for shape, _ in UNITS]

    def both(grads):
        out = []
        for g, (_, axis) in zip(grads, UNITS, strict=True):
            norm, max_norm = _transforms_more.unitwise_norm(g, axis), jnp.full(g.shape, 2.0)
            clipped = _transforms_more.unitwise_clip(norm, max_norm, g)
            theirs = optax.transforms.unitwise_norm(g, axis)
            out.append((norm, theirs, clipped, optax.transforms.unitwise_clip(theirs, max_norm, g),
                        gradtx.unitwise_norm(clipped, axis)))  # fmt: skip
        return out

    for (shape, axis), (norm, theirs, clipped, clipped_theirs, after) in zip(
        UNITS, jax.jit(both)(grads), strict=True
    ):
        msg = f"{shape}, axis {axis}"
        assert norm.shape == shape, msg
        np.testing.assert_allclose(norm, theirs, rtol=1e-6, err_msg=msg)
        np.testing.assert_allclose(clipped, clipped_theirs, rtol=1e-6, err_msg=msg)
        np.testing.assert_array_less(np.asarray(after), 2.0 + 1e-5)


@pytest.mark.parametrize("uniform", [True, False])
def test_per_example_layer_norm_clip_equals_optax(uniform):
    rng = np.random.default_rng(3)
    grads = {
        "w": jnp.asarray(rng.standard_normal((6, 4, 3)), jnp.float32),
        "b": jnp.asarray(0.1 * rng.standard_normal((6, 3)), jnp.float32),
        "z": jnp.zeros((6, 2)),
    }
    ours, theirs = jax.jit(
        lambda g: (
            compat.per_example_layer_norm_clip(g, 2.0, uniform),
            optax.per_example_layer_norm_clip(g, 2.0, uniform),
        )
    )(grads)
    helpers.assert_trees_close(ours, theirs, rtol=1e-6, atol=1e-6)
    counts = {k: int(v) for k, v in ours[1].items()}
    assert counts["w"] > 0 and counts["z"] == 0, counts


def test_one_layer_per_example_layer_norm_clip_is_the_global_one():
    grads = [jnp.array([[0.0, 0.0, 0.0], [0.0, 3.0, 4.0], [4.0, 0.0, 3.0], [3.0, 4.0, 0.0]])]
    for clip in (0.0, 1.25, 100.0):
        (summed,), (clipped,) = gradtx.per_example_layer_norm_clip(grads, clip)
        ([expected], expected_clipped) = gradtx.per_example_global_norm_clip(grads, clip)
        np.testing.assert_allclose(summed, expected, rtol=1e-6)
        assert int(clipped) == int(expected_clipped)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: gradtx.normalize_by_update_norm(0.0), ValueError,
         r"`normalize_by_update_norm`: `scale_factor` must be nonzero \(it divides the norm\), got 0.0\."),
        (lambda: gradtx.normalize_by_update_norm(1.0, -1e-6), ValueError,
         r"`normalize_by_update_norm`: `eps` must be >= 0, got -1e-06\."),
        (lambda: gradtx.normalize_by_update_norm("1"), TypeError,
         r"`normalize_by_update_norm`: `scale_factor` must be a number"),
        (lambda: gradtx.scale_by_param_block_norm(0.0), ValueError,
         r"`scale_by_param_block_norm`: `min_scale` must be > 0, got 0.0\."),
        (lambda: gradtx.per_example_layer_norm_clip([jnp.ones((2, 3))], -1.0), ValueError,
         r"`per_example_layer_norm_clip`: `global_l2_norm_clip` must be >= 0, got -1.0\."),
        (lambda: gradtx.per_example_layer_norm_clip([jnp.ones((2, 3))], 1.0, uniform=1), TypeError,
         r"`per_example_layer_norm_clip`: `uniform` must be True or False, got 1"),
        (lambda: gradtx.per_example_layer_norm_clip([jnp.ones((2, 3)), jnp.ones((3,))], 1.0), ValueError,
         r"`per_example_layer_norm_clip`: expects per-example gradients, every leaf with the same leading"),
        (lambda: gradtx.unitwise_norm(jnp.ones((2,) * 6)), ValueError,
         r"`unitwise_norm`: the parameter `x` has shape \(2, 2, 2, 2, 2, 2\); without `axis`"),
        (lambda: gradtx.unitwise_norm(jnp.ones((2, 3)), axis=2), ValueError,
         r"`unitwise_norm`: `axis` 2 is out of range for the parameter `x` of shape \(2, 3\)\."),
        (lambda: gradtx.unitwise_norm(jnp.ones((2, 3)), axis=1.0), TypeError,
         r"`unitwise_norm`: `axis` must be None, an int or a tuple of ints, got 1.0\."),
        (lambda: gradtx.unitwise_clip(jnp.ones(3), jnp.ones(3), jnp.ones((2, 4))), ValueError,
         r"`unitwise_clip`: `g_norm` of shape \(3,\) does not broadcast against `grad` of shape \(2, 4\)\."),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_scale_by_param_block_norm_needs_params():
    tx = gradtx.scale_by_param_block_norm()
    with pytest.raises(ValueError, match="scale_by_param_block_norm"):
        tx.update(jnp.ones(2), tx.init(jnp.ones(2)))
