"""gradtx/combinators/_weight_decay.py: `add_decayed_weights`, `decoupled_weight_decay` (AdamW, MomentumW)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers


def test_add_decayed_weights_adds_the_decay_to_the_gradient_as_optax():
    params, grads = helpers.problem(4, steps=3)
    ours = gradtx.chain(gradtx.add_decayed_weights(0.1), gradtx.sgd(0.05))
    theirs = optax.chain(optax.add_decayed_weights(0.1), optax.sgd(0.05))
    helpers.assert_trees_close(helpers.run(ours, params, grads)[0], helpers.run(theirs, params, grads)[0])


def test_a_decay_of_zero_passes_the_updates_through_as_optax_does():
    # optax skips a number 0 (`optax.adadelta`'s default): no `g + 0 * p` kernel per leaf, and an infinite
    # parameter does not turn its update into NaN
    params, grads = {"w": jnp.array([jnp.inf, 1.0])}, {"w": jnp.array([0.5, -2.0])}
    for tx in (gradtx.add_decayed_weights(0.0), optax.add_decayed_weights(0.0)):
        u, _ = tx.update(grads, tx.init(params), params)
        np.testing.assert_array_equal(u["w"], grads["w"])
    hlo = jax.jit(gradtx.add_decayed_weights(0).update).lower(grads, optax.EmptyState(), params).as_text()
    assert "multiply" not in hlo
    with pytest.raises(ValueError, match=r"`add_decayed_weights`: `update` needs the current parameters"):
        gradtx.add_decayed_weights(0.0).update(grads, optax.EmptyState())


def test_decoupled_weight_decay_is_tfs_var_minus_decay_times_var_before_the_inner_step():
    """TF's DecoupledWeightDecayExtension: `var -= weight_decay * var`, then the inner optimizer's step."""
    params, grads = helpers.problem(6, steps=4)
    tx = gradtx.decoupled_weight_decay(gradtx.sgd(0.1), 0.01)
    actual, _ = helpers.run(tx, params, grads)
    p = [np.asarray(x, np.float64) for x in params]
    for t, g in enumerate(grads):
        p = [x - 0.01 * x - 0.1 * np.asarray(gi, np.float64) for x, gi in zip(p, g, strict=True)]
        helpers.assert_trees_close(actual[t], p, rtol=1e-6, atol=1e-6)


def test_decoupled_weight_decay_mask_and_row_sparse_gradients():
    params = {"emb": jnp.ones((3, 2)), "bias": jnp.ones(2)}
    tx = gradtx.decoupled_weight_decay(gradtx.sgd(0.0), 0.5, mask=["emb"])
    grads = {"emb": RowSparse(jnp.array([1]), jnp.zeros((1, 2)), (3, 2)), "bias": jnp.zeros(2)}
    u, _ = tx.update(grads, tx.init(params), params)
    new = gradtx.apply_updates(params, u)
    np.testing.assert_allclose(new["emb"], [[1.0, 1.0], [0.5, 0.5], [1.0, 1.0]])  # the touched row only
    np.testing.assert_allclose(new["bias"], [1.0, 1.0])  # masked out


def test_weight_decay_errors():
    with pytest.raises(ValueError, match=r"`add_decayed_weights`: `weight_decay` must be >= 0"):
        gradtx.add_decayed_weights(-1.0)
    tx = gradtx.decoupled_weight_decay(gradtx.sgd(0.1), 0.1)
    with pytest.raises(ValueError, match=r"`decoupled_weight_decay`: `update` needs the current parameters"):
        tx.update(jnp.ones(2), tx.init(jnp.ones(2)))


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
