"""gradtx/combinators/_conditional.py: conditionally_transform / conditionally_mask against optax's, the
skipped work, extra arguments, mixed dtypes, row-sparse updates and the argument errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers


def _every_third_skipped(count):
    return count % 3 != 1


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (gradtx.conditionally_transform, optax.conditionally_transform),
        (gradtx.conditionally_mask, optax.conditionally_mask),
    ],
    ids=["transform", "mask"],
)
def test_matches_optax_step_by_step(ours, theirs):
    params, grads = helpers.problem(2, steps=7)
    # the same inner transform on both sides: the wrappers' routing and the inner count are compared
    actual, state = helpers.run(ours(optax.adam(0.1), _every_third_skipped), params, grads)
    tx = theirs(optax.adam(0.1), _every_third_skipped)
    expected, _ = helpers.run(gradtx.with_extra_args_support(tx), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-7, msg=f"step {t + 1}")
    assert int(state.count) == 7
    assert int(state.inner_state[0].count) == 5  # adam ran at counts 0, 2, 3, 5, 6


def test_the_inner_update_is_skipped_not_computed_and_discarded():
    calls = []

    def spy(updates, params):
        jax.debug.callback(lambda: calls.append(1))
        return updates

    tx = gradtx.conditionally_mask(gradtx.stateless(spy), lambda count: count == 1)
    step = jax.jit(tx.update)
    state = tx.init(jnp.zeros(2))
    outs = []
    for _ in range(3):
        u, state = step(jnp.ones(2), state)
        outs.append(np.asarray(u).tolist())
    jax.effects_barrier()
    assert outs == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    assert len(calls) == 1


def test_forward_extra_args_hands_them_to_the_condition():
    def should(count, *, use=True):
        return jnp.logical_and(use, count >= 0)

    tx = gradtx.conditionally_transform(gradtx.scale(2.0), should, forward_extra_args=True)
    state = tx.init(jnp.zeros(1))
    on, state = tx.update(jnp.ones(1), state, use=True)
    off, _ = tx.update(jnp.ones(1), state, use=False)
    assert (float(on[0]), float(off[0])) == (2.0, 1.0)
    plain = gradtx.conditionally_transform(gradtx.scale(2.0), lambda count: count >= 0)
    assert float(plain.update(jnp.ones(1), plain.init(jnp.zeros(1)), use=False)[0][0]) == 2.0  # not forwarded


def _in_param_dtypes(updates, params):
    return jax.tree.map(
        lambda u, p: (
            u.with_values(u.values.astype(p.dtype)) if isinstance(u, RowSparse) else u.astype(p.dtype)
        ),
        updates,
        params,
        is_leaf=lambda x: isinstance(x, RowSparse),
    )


def test_bf16_params_with_f32_gradients_and_row_sparse_updates_go_through_both_branches():
    params = {"w": jnp.ones(3, jnp.bfloat16), "e": jnp.ones((4, 2))}
    grads = {"w": jnp.ones(3, jnp.float32), "e": RowSparse(jnp.array([1, 1]), jnp.ones((2, 2)), (4, 2))}
    for wrap in (gradtx.conditionally_transform, gradtx.conditionally_mask):
        inner = gradtx.chain(gradtx.momentum(0.5, 0.9), gradtx.stateless(_in_param_dtypes))  # bf16 out
        tx = wrap(inner, lambda count: count == 1)
        step = jax.jit(lambda p, s, g, tx=tx: tx.update(g, s, p))
        state = tx.init(params)
        skipped, state = step(params, state, grads)
        taken, state = step(params, state, grads)
        assert skipped["w"].dtype == taken["w"].dtype == jnp.bfloat16  # one type for both lax.cond branches
        assert helpers.shape_dtypes(state) == helpers.shape_dtypes(tx.init(params))
        np.testing.assert_allclose(gradtx.apply_updates(params, taken)["e"][1], [0.0, 0.0])  # 1 - 0.5 * 2
        untouched = np.asarray(gradtx.apply_updates(params, skipped)["e"])
        np.testing.assert_allclose(untouched[[0, 2, 3]], np.ones((3, 2)))


@pytest.mark.parametrize("factory", [gradtx.conditionally_transform, gradtx.conditionally_mask])
def test_bad_arguments_are_refused(factory):
    name = factory.__name__
    with pytest.raises(TypeError, match=rf"`{name}`: `inner` must be a gradient transformation"):
        factory(None, lambda count: True)
    with pytest.raises(TypeError, match=rf"`{name}`: `should_transform_fn` must be callable, got 3"):
        factory(gradtx.sgd(0.1), 3)
    with pytest.raises(TypeError, match=rf"`{name}`: `forward_extra_args` must be True or False"):
        factory(gradtx.sgd(0.1), lambda count: True, forward_extra_args="yes")
    tx = factory(gradtx.sgd(0.1), lambda count: jnp.array([True, False]))
    with pytest.raises(ValueError, match=rf"`{name}`: `should_transform_fn` must return a scalar bool"):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
