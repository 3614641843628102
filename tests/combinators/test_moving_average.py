"""gradtx/combinators/_moving_average.py and _variable_clipping.py: averages of the params, projections of
them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers


def _reference(params, grads_seq, lr, decay, num_updates):
    avg = [np.asarray(p, np.float64) for p in params]
    ps = [np.asarray(p, np.float64) for p in params]
    for t, grads in enumerate(grads_seq, start=1):
        ps = [p - lr * np.asarray(g, np.float64) for p, g in zip(ps, grads, strict=True)]
        d = min(decay, (1 + t) / (10 + t)) if num_updates else decay
        avg = [a - (a - p) * (1 - d) for a, p in zip(avg, ps, strict=True)]
    return ps, avg


@pytest.mark.parametrize("num_updates", [False, True])
def test_averages_follow_tfs_rule(num_updates):
    params, grads = helpers.problem(0)
    tx = gradtx.moving_average(gradtx.sgd(0.1), 0.9, num_updates=num_updates)
    actual, state = helpers.run(tx, params, grads)
    ps, avg = _reference(params, grads, 0.1, 0.9, num_updates)
    helpers.assert_trees_close(actual[-1], ps, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(gradtx.averaged_params(state), avg, rtol=1e-5, atol=1e-6)


def test_swap_averaged_is_the_swapping_saver_and_swaps_back():
    params = {"w": jnp.zeros(2)}
    tx = gradtx.chain(gradtx.clip_by_global_norm(10.0), gradtx.moving_average(gradtx.sgd(1.0), 0.5))
    u, state = tx.update({"w": jnp.array([-2.0, 2.0])}, tx.init(params), params)
    params = gradtx.apply_updates(params, u)
    eval_params, swapped = gradtx.swap_averaged(params, state)
    np.testing.assert_allclose(eval_params["w"], [1.0, -1.0])
    np.testing.assert_allclose(gradtx.averaged_params(swapped)["w"], [2.0, -2.0])
    back, restored = gradtx.swap_averaged(eval_params, swapped)
    helpers.assert_trees_close(back, params, rtol=0, atol=0)
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)


def test_moving_average_errors():
    with pytest.raises(
        ValueError, match=r"`moving_average`: `average_decay` must be in \[0.0, 1.0\], got 1.5"
    ):
        gradtx.moving_average(gradtx.sgd(0.1), 1.5)
    with pytest.raises(ValueError, match=r"`averaged_params`: the state holds no `moving_average` state"):
        gradtx.averaged_params(gradtx.sgd(0.1).init(jnp.zeros(1)))
    with pytest.raises(ValueError, match=r"`moving_average`: `update` needs the current parameters"):
        tx = gradtx.moving_average(gradtx.sgd(0.1))
        tx.update(jnp.ones(1), tx.init(jnp.ones(1)))


def test_clip_variables_projects_rows_along_the_given_axes():
    params = {"emb": jnp.array([[3.0, 4.0], [0.3, 0.4]]), "bias": jnp.array([10.0])}
    tx = gradtx.chain(gradtx.sgd(0.0), gradtx.clip_variables(1.0, {"emb": [1]}))
    u, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    new = gradtx.apply_updates(params, u)
    np.testing.assert_allclose(new["emb"], [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    assert float(new["bias"][0]) == 10.0  # not named in dims
    whole = gradtx.clip_variables(1.0, {"emb": [0, 1]})
    u, _ = whole.update(jax.tree.map(jnp.zeros_like, params), whole.init(params), params)
    assert float(jnp.linalg.norm(gradtx.apply_updates(params, u)["emb"])) == pytest.approx(1.0, rel=1e-6)


def test_clip_variables_on_row_sparse_updates_touches_those_rows_only():
    table = jnp.array([[3.0, 4.0], [6.0, 8.0], [0.0, 5.0]])
    tx = gradtx.clip_variables(1.0, {"t": [1]})
    u, _ = tx.update(
        {"t": RowSparse(jnp.array([0, 0]), jnp.zeros((2, 2)), (3, 2))}, tx.init({"t": table}), {"t": table}
    )
    new = gradtx.apply_updates({"t": table}, u)["t"]
    np.testing.assert_allclose(new, [[0.6, 0.8], [6.0, 8.0], [0.0, 5.0]], rtol=1e-6)


def test_clip_variables_errors():
    with pytest.raises(
        TypeError, match=r"`clip_variables`: `dims` must be a non-empty dict key path -> list of axes"
    ):
        gradtx.clip_variables(1.0, [1])
    with pytest.raises(ValueError, match=r"`clip_variables`: the keys \['decoder'\] match no parameter"):
        gradtx.clip_variables(1.0, {"decoder": [1]}).init({"emb": jnp.ones((2, 2))})
    with pytest.raises(ValueError, match=r"axes \[2\] are out of range for 'emb' of shape \(2, 2\)"):
        gradtx.clip_variables(1.0, {"emb": [2]}).init({"emb": jnp.ones((2, 2))})
    with pytest.raises(ValueError, match=r"`clip_variables`: `max_norm` must be >= 0"):
        gradtx.clip_variables(-1.0, {"emb": [1]})


def test_decoupled_weight_decay_with_the_lr_scaled_convention_equals_optax_adamw():
    import optax

    params, grads = helpers.problem(5)
    ours = gradtx.decoupled_weight_decay(
        gradtx.chain(gradtx.scale_by_adam(0.9, 0.999, 1e-8), gradtx.scale_by_learning_rate(0.01)),
        0.1,
        learning_rate=0.01,
    )
    a, _ = helpers.run(ours, params, grads)
    b, _ = helpers.run(optax.adamw(0.01, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.1), params, grads)
    # TF's epsilon-hat Adam differs from optax's bias-corrected one by eps placement only: a tiny difference
    helpers.assert_trees_close(a, b, rtol=1e-4, atol=1e-5)
