"""gradtx/combinators/_privacy.py: per-example clipping and DP-SGD's noisy mean against optax's."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx

RNG = np.random.default_rng(0)
BATCH = 16
PARAMS = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}
PER_EXAMPLE = jax.tree.map(
    lambda p: jnp.asarray(
        RNG.standard_normal((BATCH, *p.shape)) * RNG.uniform(0.1, 3, (BATCH,) + (1,) * p.ndim), jnp.float32
    ),
    PARAMS,
)


@jax.jit
def _both(grads, clip):
    """gradtx's and optax's per-example clipping, in one compilation (`clip` traced)."""
    return gradtx.per_example_global_norm_clip(grads, clip), optax.per_example_global_norm_clip(
        jax.tree.leaves(grads), clip
    )


def test_per_example_global_norm_clip_matches_optax():
    for clip in (0.0, 1.0, 2.5, 1e6):
        (summed, clipped), (expected, expected_clipped) = _both(PER_EXAMPLE, clip)
        for a, e in zip(jax.tree.leaves(summed), expected, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, err_msg=f"clip {clip}")
        assert int(clipped) == int(expected_clipped)
        assert jax.tree.structure(summed) == jax.tree.structure(PARAMS)
    assert 0 < int(_both(PER_EXAMPLE, 2.5)[0][1]) < BATCH  # some clipped, some not


def test_differentially_private_aggregate_without_noise_matches_optax():
    tx = gradtx.differentially_private_aggregate(1.5, 0.0, seed=3)
    ref = optax.contrib.differentially_private_aggregate(1.5, 0.0, key=jax.random.key(3))
    leaves = jax.tree.leaves(PER_EXAMPLE)
    ours, theirs = jax.jit(
        lambda g, s, r: (tx.update(g, s, PARAMS)[0], ref.update(jax.tree.leaves(g), r)[0])
    )(PER_EXAMPLE, tx.init(PARAMS), ref.init(leaves))
    for a, e in zip(jax.tree.leaves(ours), theirs, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-7)


def test_the_noise_has_std_noise_multiplier_times_clip_over_batch_and_is_reproducible():
    zeros = {"w": jnp.zeros((4, 200, 50))}  # 4 examples, 10,000 noise draws per step
    tx = gradtx.differentially_private_aggregate(2.0, 0.5, seed=1)
    step = jax.jit(tx.update)
    state = tx.init({"w": jnp.zeros((200, 50))})
    first, state = step(zeros, state)
    second, _ = step(zeros, state)
    assert float(jnp.std(first["w"])) == pytest.approx(2.0 * 0.5 / 4, rel=0.05)
    assert abs(float(jnp.mean(first["w"]))) < 0.01
    assert not np.array_equal(first["w"], second["w"])  # fresh noise per step
    again, _ = step(zeros, tx.init({"w": jnp.zeros((200, 50))}))
    np.testing.assert_array_equal(again["w"], first["w"])  # a pure function of (seed, count, key path)


def test_dp_sgd_is_a_chain_and_learns():
    tx = gradtx.chain(gradtx.differentially_private_aggregate(1.0, 0.1, seed=0), gradtx.sgd(0.5))
    x = jnp.asarray(RNG.standard_normal((BATCH, 3)), jnp.float32)
    y = x @ jnp.array([1.0, -1.0, 0.5])

    def loss(p, xi, yi):
        return (xi @ p - yi) ** 2

    @jax.jit
    def step(p, s):
        per_example = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(p, x, y)
        u, s = tx.update(per_example, s, p)
        return gradtx.apply_updates(p, u), s

    p, s = jnp.zeros(3), tx.init(jnp.zeros(3))
    for _ in range(60):
        p, s = step(p, s)
    assert float(jnp.mean((x @ p - y) ** 2)) < 0.05


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: gradtx.per_example_global_norm_clip(PER_EXAMPLE, -1.0),
            ValueError,
            r"`l2_norm_clip` must be >= 0",
        ),
        (
            lambda: gradtx.per_example_global_norm_clip(PER_EXAMPLE, float("inf")),
            ValueError,
            r"must be finite",
        ),
        (
            lambda: gradtx.per_example_global_norm_clip(PER_EXAMPLE, lambda c: 1.0),
            TypeError,
            r"not a schedule",
        ),
        (
            lambda: gradtx.per_example_global_norm_clip({"a": jnp.ones((3, 2)), "b": jnp.ones((4,))}, 1.0),
            ValueError,
            r"`per_example_global_norm_clip`: expects per-example gradients, every leaf with the same "
            r"leading batch axis .*; got \['a'\]: \(3, 2\), \['b'\]: \(4,\)",
        ),
        (lambda: gradtx.per_example_global_norm_clip({"s": jnp.ones(())}, 1.0), ValueError, r"\['s'\]: \(\)"),
        (
            lambda: gradtx.differentially_private_aggregate(1.0, -0.5),
            ValueError,
            r"`differentially_private_aggregate`: `noise_multiplier` must be >= 0, got -0.5\.",
        ),
        (
            lambda: gradtx.differentially_private_aggregate(float("nan"), 1.0),
            ValueError,
            r"`differentially_private_aggregate`: `l2_norm_clip` must be finite",
        ),
        (
            lambda: gradtx.differentially_private_aggregate(1.0, 1.0, seed=0.5),
            TypeError,
            r"`differentially_private_aggregate`: `seed` must be an integer",
        ),
    ],
    ids=["negative", "inf", "schedule", "batch_sizes", "scalar_leaf", "noise", "nan_clip", "seed"],
)
def test_bad_arguments_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_param_shaped_gradient_is_refused_at_update_with_the_shapes():
    tx = gradtx.differentially_private_aggregate(1.0, 0.0)
    grads = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
    with pytest.raises(
        ValueError, match=r"`differentially_private_aggregate`: expects per-example gradients"
    ):
        tx.update(grads, tx.init(grads))
