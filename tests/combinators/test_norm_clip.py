"""gradtx/combinators/_norm_clip.py: global_norm and adaptive_grad_clip against optax's, unit by unit."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx

RNG = np.random.default_rng(0)
SHAPES = [(), (5,), (1, 5), (4, 3), (2, 3, 4), (2, 2, 3, 4), (2, 2, 2, 3, 2)]


def _tree(scale=1.0):
    return {str(s): jnp.asarray(scale * RNG.standard_normal(s), jnp.float32) for s in SHAPES}


def test_global_norm_is_optaxs_and_sums_low_precision_leaves_in_float32():
    tree = _tree()
    half = {**tree, "half": jnp.full((3,), 300.0, jnp.bfloat16)}  # optax sums this one in bf16
    ours, ours_half, theirs = jax.jit(
        lambda t, h: (gradtx.global_norm({**t, "none": None}), gradtx.global_norm(h), optax.tree.norm(t))
    )(tree, half)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    exact = np.sqrt(sum(np.sum(np.asarray(x, np.float64) ** 2) for x in jax.tree.leaves(half)))
    np.testing.assert_allclose(ours_half, exact, rtol=1e-6)
    assert ours_half.dtype == jnp.float32
    assert float(gradtx.global_norm({})) == 0.0


@pytest.mark.parametrize("axis", [None, 0, (0, 1)], ids=["by_rank", "axis0", "axes01"])
def test_adaptive_grad_clip_matches_optax_for_every_rank(axis):
    shapes = SHAPES if axis is None else [s for s in SHAPES if len(s) >= (2 if axis == (0, 1) else 1)]
    params = {k: v for k, v in _tree().items() if tuple(v.shape) in shapes}
    params["zero"] = jnp.zeros((3, 2))  # eps lets zero-initialised units move
    grads = jax.tree.map(lambda p: jnp.asarray(3 * RNG.standard_normal(p.shape), jnp.float32), params)
    tx, ref = gradtx.adaptive_grad_clip(0.3, eps=1e-2, axis=axis), optax.adaptive_grad_clip(0.3, 1e-2, axis)
    out, expected = jax.jit(  # one compilation for both
        lambda g, p: (tx.update(g, gradtx.EmptyState(), p)[0], ref.update(g, optax.EmptyState(), p)[0])
    )(grads, params)
    for k in params:
        np.testing.assert_allclose(out[k], expected[k], rtol=1e-6, atol=1e-7, err_msg=k)
        assert not np.array_equal(out[k], grads[k]), f"{k}: nothing was clipped"


def test_adaptive_grad_clip_clips_each_unit_on_its_own():
    params = jnp.array([[3.0, 0.0, 1.0], [4.0, 0.0, 0.0]])  # column norms 5, 0 (-> eps), 1
    grads = jnp.array([[0.0, 1.0, 0.05], [2.0, 0.0, 0.0]])  # column norms 2, 1, 0.05
    tx = gradtx.adaptive_grad_clip(0.1, eps=0.5)
    out, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(
        out, [[0.0, 0.05, 0.05], [0.5, 0.0, 0.0]], rtol=1e-6
    )  # 0.5, 0.1*0.5, unclipped


def test_a_scheduled_clipping_counts_its_steps():
    tx = gradtx.adaptive_grad_clip(lambda count: 0.1 * (count + 1))
    params, grads = jnp.ones(4), jnp.full(4, 10.0)
    state = tx.init(params)
    norms = []
    for _ in range(2):
        out, state = tx.update(grads, state, params)
        norms.append(round(float(jnp.linalg.norm(out)), 5))
    assert norms == [0.2, 0.4] and int(state.count) == 2  # 0.1 * 2, then 0.2 * 2 (||params|| = 2)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"clipping": 0.0}, ValueError, r"`adaptive_grad_clip`: `clipping` must be > 0, got 0.0\."),
        ({"clipping": float("inf")}, ValueError, r"`adaptive_grad_clip`: `clipping` must be finite"),
        ({"clipping": 0.1, "eps": -1.0}, ValueError, r"`adaptive_grad_clip`: `eps` must be >= 0, got -1.0\."),
        ({"clipping": "0.1"}, TypeError, r"`adaptive_grad_clip`: `clipping` must be a number"),
        (
            {"clipping": 0.1, "axis": 1.5},
            TypeError,
            r"`axis` must be None, an int or a tuple of ints, got 1.5",
        ),
        (
            {"clipping": 0.1, "axis": ()},
            TypeError,
            r"`axis` must be None, an int or a tuple of ints, got \(\)",
        ),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.adaptive_grad_clip(**kwargs)


def test_update_time_errors_name_the_leaf():
    tx = gradtx.adaptive_grad_clip(0.1)
    six_d = {"w": jnp.ones((1, 2, 1, 2, 1, 2))}
    with pytest.raises(
        ValueError, match=r"`adaptive_grad_clip`: the parameter \['w'\] has shape \(1, 2, 1, 2, 1, 2\)"
    ):
        tx.update(six_d, tx.init(six_d), six_d)
    with pytest.raises(
        ValueError, match=r"`adaptive_grad_clip`: `axis` 2 is out of range for the parameter \['w'\]"
    ):
        gradtx.adaptive_grad_clip(0.1, axis=2).update(
            {"w": jnp.ones((2, 2))}, gradtx.EmptyState(), {"w": jnp.ones((2, 2))}
        )
    with pytest.raises(ValueError, match=r"`adaptive_grad_clip`: `update` needs the current parameters"):
        tx.update(six_d, tx.init(six_d))
