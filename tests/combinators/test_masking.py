"""gradtx/combinators/_masking.py: masked, freeze, partition."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers

PARAMS = {"encoder": {"kernel": jnp.ones((2, 2)), "bias": jnp.ones(2)}, "head": {"kernel": jnp.ones((2, 1))}}
GRADS = jax.tree.map(lambda p: jnp.full_like(p, 0.5), PARAMS)


def test_masked_applies_inner_to_the_selected_leaves_and_passes_others_through():
    tx = gradtx.masked(gradtx.adam(0.1), ["*/kernel"])
    state = tx.init(PARAMS)
    assert gradtx.get_slot(state, "m")["encoder"]["bias"] is None  # no slots for the masked-out bias
    out, state = tx.update(GRADS, state, PARAMS)
    np.testing.assert_array_equal(out["encoder"]["bias"], GRADS["encoder"]["bias"])
    plain, _ = gradtx.adam(0.1).update(GRADS, gradtx.adam(0.1).init(PARAMS), PARAMS)
    helpers.assert_trees_close(out["head"], plain["head"], rtol=0, atol=0)


def test_mask_forms_agree():
    as_tree = {"encoder": {"kernel": True, "bias": False}, "head": {"kernel": True}}
    as_fn = lambda p: jax.tree.map(lambda x: x.ndim == 2, p)  # noqa: E731
    outs = []
    for mask in (as_tree, as_fn, ["kernel"]):
        tx = gradtx.masked(gradtx.scale(0.0), mask)
        outs.append(tx.update(GRADS, tx.init(PARAMS), PARAMS)[0])
    for o in outs[1:]:
        helpers.assert_trees_close(o, outs[0], rtol=0, atol=0)


def test_masked_global_norm_sees_only_the_selected_leaves():
    tx = gradtx.masked(gradtx.clip_by_global_norm(100.0), ["head"])
    _, state = tx.update(GRADS, tx.init(PARAMS), PARAMS)
    assert float(state.inner_state.global_norm) == pytest.approx(np.sqrt(2 * 0.25))


def test_freeze_zeroes_the_selected_updates():
    tx = gradtx.chain(gradtx.sgd(1.0), gradtx.freeze(["encoder"]))
    out, _ = tx.update(GRADS, tx.init(PARAMS), PARAMS)
    new = gradtx.apply_updates(PARAMS, out)
    helpers.assert_trees_close(new["encoder"], PARAMS["encoder"], rtol=0, atol=0)
    np.testing.assert_array_equal(new["head"]["kernel"], 0.5 * np.ones((2, 1)))


def test_partition_routes_each_label_to_its_transform():
    labels = {"encoder": {"kernel": "slow", "bias": "slow"}, "head": {"kernel": "fast"}}
    tx = gradtx.partition({"slow": gradtx.sgd(0.1), "fast": gradtx.momentum(1.0, 0.9)}, labels)
    state = tx.init(PARAMS)
    assert gradtx.get_slot(state["fast"], "momentum")["encoder"]["kernel"] is None
    out, state = tx.update(GRADS, state, PARAMS)
    np.testing.assert_allclose(out["encoder"]["kernel"], -0.05 * np.ones((2, 2)), rtol=1e-6)
    np.testing.assert_allclose(out["head"]["kernel"], -0.5 * np.ones((2, 1)), rtol=1e-6)


def test_partition_equals_masked_chain():
    """partition({a: A, b: B}, labels) == chain(masked(A, labels == a), masked(B, labels == b))."""
    labels = {"encoder": {"kernel": "a", "bias": "b"}, "head": {"kernel": "a"}}
    a, b = gradtx.adam(0.1), gradtx.rmsprop(0.01)
    part = gradtx.partition({"a": a, "b": b}, labels)
    masks = {k: jax.tree.map(lambda lab, k=k: lab == k, labels) for k in "ab"}
    chained = gradtx.chain(gradtx.masked(a, masks["a"]), gradtx.masked(b, masks["b"]))
    grads = [jax.tree.map(lambda p, s=s: p * (s + 1), GRADS) for s in range(3)]
    helpers.assert_trees_close(
        helpers.run(part, PARAMS, grads)[0], helpers.run(chained, PARAMS, grads)[0], rtol=0, atol=0
    )


def test_partition_and_mask_errors():
    with pytest.raises(ValueError, match=r"`partition`: `param_labels` uses 'c', which have no transform"):
        gradtx.partition(
            {"a": gradtx.sgd(0.1)}, {"encoder": {"kernel": "a", "bias": "c"}, "head": {"kernel": "a"}}
        ).init(PARAMS)
    with pytest.raises(TypeError, match=r"`partition`: `transforms` must be a non-empty dict"):
        gradtx.partition({}, {})
    with pytest.raises(TypeError, match=r"`masked`: `mask` must be a tree of bools"):
        gradtx.masked(gradtx.sgd(0.1), "kernel")
    with pytest.raises(gradtx.TreeMismatchError, match=r"`masked`: `mask` and params"):
        gradtx.masked(gradtx.sgd(0.1), {"encoder": True}).init(PARAMS)
    with pytest.raises(TypeError, match=r"`masked`: `mask` must hold a Python bool per parameter, got 'yes'"):
        gradtx.masked(gradtx.sgd(0.1), jax.tree.map(lambda _: "yes", PARAMS)).init(PARAMS)
