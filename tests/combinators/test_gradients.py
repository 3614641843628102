"""gradtx/combinators/_gradients.py and _weight_decay.py: the optimize_loss gradient processing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse


def test_transform_gradients_gets_grads_and_params():
    tx = gradtx.transform_gradients(lambda g, p: jax.tree.map(lambda x, y: x * y, g, p))
    out, _ = tx.update({"a": jnp.array([2.0])}, tx.init(None), {"a": jnp.array([3.0])})
    assert float(out["a"][0]) == 6.0
    bad = gradtx.transform_gradients(lambda g, p: [g])
    with pytest.raises(
        gradtx.TreeMismatchError, match=r"`transform_gradients`: grads and fn\(grads, params\)"
    ):
        bad.update({"a": jnp.ones(1)}, bad.init(None))


def test_noise_is_reproducible_truncated_scaled_and_per_leaf():
    tx = gradtx.add_noise(0.5, seed=7)
    g = {"a": jnp.zeros(20_000), "b": jnp.zeros(3)}
    n1, s = tx.update(g, tx.init(None))
    n1b, _ = tx.update(g, tx.init(None))
    n2, _ = tx.update(g, s)
    np.testing.assert_array_equal(n1["a"], n1b["a"])  # same seed and step: same noise
    assert not np.allclose(n1["a"], n2["a"])  # next step: new noise
    assert float(jnp.max(jnp.abs(n1["a"]))) <= 1.0  # truncated at 2 sigma = 1.0
    assert abs(float(jnp.std(n1["a"])) - 0.5 * 0.8796) < 0.02  # std of N(0,1) truncated at +-2
    only_a, _ = tx.update({"a": jnp.zeros(20_000)}, tx.init(None))
    np.testing.assert_array_equal(only_a["a"], n1["a"])  # a leaf's noise ignores the other leaves
    plain, _ = gradtx.add_noise(0.5, seed=7, truncated=False).update(g, tx.init(None))
    assert float(jnp.max(jnp.abs(plain["a"]))) > 1.0


def test_noise_folds_every_leafs_key_in_at_once():
    # a fold per leaf was a kernel per leaf (2,217 kernels to optax's 1,344 on `make bench`'s tree): the
    # step's key is folded with the count, then with every leaf's salt at once
    tx = gradtx.add_noise(0.5, seed=7)
    g = {f"w{i}": jnp.zeros((4, 3)) for i in range(12)}
    folds = str(jax.make_jaxpr(tx.update)(g, tx.init(None))).count("random_fold_in")
    assert folds == 2, folds
    one, _ = tx.update({"w3": g["w3"]}, tx.init(None))  # and a leaf's noise is still its own
    np.testing.assert_array_equal(one["w3"], tx.update(g, tx.init(None))[0]["w3"])


def test_noise_uses_a_given_key_and_densifies_row_sparse_as_tf():
    tx = gradtx.add_noise(1.0)
    a, _ = tx.update(jnp.zeros(3), tx.init(None), key=jax.random.key(1))
    b, _ = tx.update(jnp.zeros(3), tx.init(None), key=jax.random.key(1))
    np.testing.assert_array_equal(a, b)
    out, _ = tx.update(RowSparse(jnp.array([1]), jnp.ones((1, 2)), (3, 2)), tx.init(None))
    assert out.shape == (3, 2) and not isinstance(out, RowSparse)


def test_scale_gradients_by_exact_path_or_pattern():
    g = {"dense": {"kernel": jnp.ones(2), "bias": jnp.ones(2)}, "out": {"kernel": jnp.ones(2)}}
    tx = gradtx.scale_gradients({"dense/kernel": 2.0, "*/bias": 0.5, "out": lambda count: 3.0})
    out, state = tx.update(g, tx.init(g), g)
    assert float(out["dense"]["kernel"][0]) == 2.0 and float(out["dense"]["bias"][0]) == 0.5
    assert float(out["out"]["kernel"][0]) == 3.0 and int(state.count) == 1
    sparse = RowSparse(jnp.array([0]), jnp.ones((1, 2)), (4, 2))
    out, _ = gradtx.scale_gradients({"emb": 0.25}).update({"emb": sparse}, (), {"emb": jnp.ones((4, 2))})
    np.testing.assert_array_equal(out["emb"].values, [[0.25, 0.25]])


def test_scale_gradients_errors():
    g = {"dense": {"kernel": jnp.ones(2), "bias": jnp.ones(2)}}
    with pytest.raises(
        ValueError,
        match=r"`scale_gradients`: the keys \['decoder'\] match no parameter; "
        r"parameters: \['dense/bias', 'dense/kernel'\]",
    ):
        gradtx.scale_gradients({"decoder": 2.0}).init(g)
    with pytest.raises(ValueError, match=r"the parameter 'dense/kernel' is matched by several keys"):
        gradtx.scale_gradients({"dense": 2.0, "kernel": 3.0}).init(g)
    with pytest.raises(TypeError, match=r"`scale_gradients`: `multipliers` must be a non-empty dict"):
        gradtx.scale_gradients([])
    with pytest.raises(TypeError, match=r"`scale_gradients`: `multipliers\['a'\]` must be a number"):
        gradtx.scale_gradients({"a": "2"})


def test_add_decayed_weights_with_mask_and_sparse_rows():
    params = {"w": jnp.array([1.0, 2.0]), "b": jnp.array([4.0])}
    tx = gradtx.add_decayed_weights(0.5, mask=["w"])
    out, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    np.testing.assert_array_equal(out["w"], [0.5, 1.0])
    np.testing.assert_array_equal(out["b"], [0.0])
    table = jnp.arange(6.0).reshape(3, 2)
    g = RowSparse(jnp.array([2, 2]), jnp.ones((2, 2)), (3, 2))
    out, _ = gradtx.add_decayed_weights(0.5).update({"t": g}, (), {"t": table})
    np.testing.assert_array_equal(out["t"].todense()[2], [2.0 + 2.0, 2.0 + 2.5])  # decay added once per row
    with pytest.raises(ValueError, match=r"`add_decayed_weights`: `weight_decay` must be >= 0"):
        gradtx.add_decayed_weights(-0.1)
    with pytest.raises(ValueError, match=r"`add_decayed_weights`: `update` needs the current parameters"):
        gradtx.add_decayed_weights(0.1).update(params, ())
