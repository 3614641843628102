"""gradtx/combinators/_masking.py: masked, freeze, partition."""

import equinox as eqx
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
    with pytest.raises(
        TypeError, match=r"`masked`: `mask` must hold a bool \(Python, numpy or a 0-d bool array\) per"
    ):
        gradtx.masked(gradtx.sgd(0.1), jax.tree.map(lambda _: "yes", PARAMS)).init(PARAMS)


@pytest.mark.parametrize(
    "prefix, frozen",
    [
        (True, {"encoder": {"kernel": True, "bias": True}, "head": {"kernel": True}}),
        (False, {"encoder": {"kernel": False, "bias": False}, "head": {"kernel": False}}),
        (
            {"encoder": True, "head": False},
            {"encoder": {"kernel": True, "bias": True}, "head": {"kernel": False}},
        ),
        ({"encoder": {"kernel": np.bool_(True), "bias": False}, "head": np.array(False)}, None),
    ],
)
def test_freeze_and_masked_take_prefix_masks_as_optax_does(prefix, frozen):
    import optax

    full = frozen or {"encoder": {"kernel": True, "bias": False}, "head": {"kernel": False}}
    tx = gradtx.chain(gradtx.sgd(1.0), gradtx.freeze(prefix))
    out, _ = tx.update(GRADS, tx.init(PARAMS), PARAMS)
    ref = optax.chain(optax.sgd(1.0), optax.masked(optax.set_to_zero(), full))
    helpers.assert_trees_close(out, ref.update(GRADS, ref.init(PARAMS), PARAMS)[0], rtol=0, atol=0)
    masked = gradtx.masked(gradtx.adam(0.1), prefix)
    state = masked.init(PARAMS)
    m = gradtx.get_slot(state, "m")
    assert [x is not None for x in jax.tree.leaves(m, is_leaf=lambda x: x is None)] == jax.tree.leaves(full)
    ref = gradtx.masked(gradtx.adam(0.1), full)  # the same mask spelled out leaf by leaf
    helpers.assert_trees_close(
        masked.update(GRADS, state, PARAMS)[0], ref.update(GRADS, ref.init(PARAMS), PARAMS)[0], rtol=0, atol=0
    )


def test_partition_labels_may_be_a_prefix():
    tx = gradtx.partition(
        {"slow": gradtx.sgd(0.1), "fast": gradtx.sgd(1.0)}, {"encoder": "slow", "head": "fast"}
    )
    out, _ = tx.update(GRADS, tx.init(PARAMS), PARAMS)
    np.testing.assert_allclose(out["encoder"]["bias"], -0.05 * np.ones(2), rtol=1e-6)
    np.testing.assert_allclose(out["head"]["kernel"], -0.5 * np.ones((2, 1)), rtol=1e-6)


class _Model(eqx.Module):
    """An equinox model: its masks (`jax.tree.map` of it) are callable pytrees."""

    w: jax.Array
    b: jax.Array

    def __call__(self, x):
        return x @ self.w + self.b


def test_a_callable_pytree_mask_is_a_tree_not_a_function():
    model = _Model(jnp.ones((2, 2)), jnp.ones(2))
    mask = jax.tree.map(lambda x: x.ndim == 2, model)  # _Model(w=True, b=False): callable
    assert callable(mask)
    grads = jax.tree.map(jnp.ones_like, model)
    tx = gradtx.chain(gradtx.sgd(1.0), gradtx.freeze(mask))
    out, _ = tx.update(grads, tx.init(model), model)
    np.testing.assert_array_equal(out.w, np.zeros((2, 2)))
    np.testing.assert_array_equal(out.b, -np.ones(2))
    masked = gradtx.masked(gradtx.adam(0.1), mask)
    state = masked.init(model)
    assert gradtx.get_slot(state, "m").b is None
    out, _ = masked.update(grads, state, model)
    np.testing.assert_array_equal(out.b, np.ones(2))  # passed through
    assert float(out.w[0, 0]) == pytest.approx(-0.1)
    decay = gradtx.add_decayed_weights(0.5, mask=mask)
    out, _ = decay.update(jax.tree.map(jnp.zeros_like, model), decay.init(model), model)
    np.testing.assert_array_equal(out.b, np.zeros(2))


def test_mask_leaves_may_be_numpy_bools_and_nothing_else_is_coerced():
    mask = {
        "encoder": {"kernel": np.bool_(True), "bias": np.array(False)},
        "head": {"kernel": jnp.array(True)},
    }
    tx = gradtx.masked(gradtx.scale(0.0), mask)
    out, _ = tx.update(GRADS, tx.init(PARAMS), PARAMS)
    assert float(out["encoder"]["kernel"][0, 0]) == 0.0 and float(out["encoder"]["bias"][0]) == 0.5
    for bad in (1, 0.5, None, np.array([True, False])):
        with pytest.raises(
            TypeError, match=r"`freeze`: `mask` must be a tree of bools shaped like the params"
        ):
            gradtx.freeze(bad)
    with pytest.raises(
        TypeError, match=r"`freeze`: `mask` must hold a bool .* per parameter or subtree, got 1"
    ):
        gradtx.freeze({"encoder": 1, "head": True}).init(PARAMS)
    with pytest.raises(gradtx.TreeMismatchError, match=r"`freeze`: `mask` and params must match.*prefix"):
        gradtx.freeze({"encoder": {"kernel": True}, "head": True}).init(PARAMS)


@pytest.mark.parametrize("empty", [[], (), {}], ids=["list", "tuple", "dict"])
def test_masked_and_freeze_take_an_empty_container_for_empty_params_as_optax(empty):
    import optax

    for tx in (gradtx.masked(gradtx.adam(0.1), empty), gradtx.freeze(empty)):
        state = tx.init(empty)
        out, _ = tx.update(empty, state, empty)
        assert out == empty and type(out) is type(empty)
    theirs = optax.masked(optax.adam(0.1), empty)
    assert theirs.update(empty, theirs.init(empty), empty)[0] == empty
    other = {"[]": {}, "()": {}, "{}": []}[repr(empty)]  # a container of another type: refused, as by optax
    with pytest.raises(gradtx.TreeMismatchError, match=r"`masked`: `mask` and params must match"):
        gradtx.masked(gradtx.adam(0.1), other).init(empty)
    with pytest.raises(TypeError, match=r"`masked`: `mask` must be a tree of bools"):
        gradtx.masked(gradtx.adam(0.1), None)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: gradtx.masked(gradtx.adam(0.1), m),
        lambda m: gradtx.chain(gradtx.freeze(m), gradtx.adam(0.1)),
        lambda m: gradtx.chain(gradtx.add_decayed_weights(0.1, mask=m), gradtx.momentum(0.1, 0.9)),
        lambda m: gradtx.decoupled_weight_decay(gradtx.adam(0.1), 0.1, mask=m),
    ],
    ids=["masked", "freeze", "add_decayed_weights", "decoupled_weight_decay"],
)
def test_optax_map_params_maps_the_slots_of_states_with_a_dict_mask(make):
    """`optax.tree.map_params` inits with a leafless placeholder for the params: the mask is not resolved
    against it (optax's `masked` passes it on whole), so the slots are found and mapped."""
    optax = pytest.importorskip("optax")
    params = {"a": jnp.ones(3), "b": jnp.ones(2)}
    tx = make({"a": True, "b": False})
    state = tx.init(params)
    mapped = optax.tree.map_params(tx.init, lambda x: x + 6.0, state)
    for (path, new), old in zip(
        jax.tree_util.tree_flatten_with_path(mapped)[0], jax.tree.leaves(state), strict=True
    ):
        slot = any(getattr(k, "key", None) in ("a", "b") for k in path)
        np.testing.assert_array_equal(new, old + 6.0 if slot else old)


def test_partition_refuses_no_labels_and_unlabelled_parameters():
    with pytest.raises(TypeError, match=r"`partition`: `param_labels` must be a tree of labels .* got None"):
        gradtx.partition({"x": gradtx.sgd(0.1)}, None)
    tx = gradtx.partition({"x": gradtx.sgd(0.1)}, {"encoder": "x", "head": None})
    with pytest.raises(ValueError, match=r"gives no label to the parameters at \['head'\]\['kernel'\]"):
        tx.init(PARAMS)
