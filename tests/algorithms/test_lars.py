"""gradtx/_algorithms/lars.py: scale_by_lars, contrib's LARSOptimizer as a building block, and the alias
`lars` against the float64 reference of contrib's rule.

Here: the block's numbers in float64 (a row-sparse leaf, which takes plain momentum, and dense leaves in one
tree), the trust ratio of 1 when a norm is 0, `skip` matched against key paths, the norms taken per leaf,
the slots, and the errors; the alias's numbers against tests/reference_contrib.py in float32 and float64,
dense and row-sparse, its plain `skip` list, and its errors (with AdamW's bad decay flag).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import ScaleByLarsState, scale_by_lars
from tests import helpers, reference
from tests import reference_contrib as ref

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def _trust(w, g, eeta, weight_decay, eps):
    """contrib's compute_lr, in float64."""
    w_norm, g_norm = np.linalg.norm(w), np.linalg.norm(g)
    return eeta * w_norm / (g_norm + weight_decay * w_norm + eps) if w_norm > 0 and g_norm > 0 else 1.0


def test_numbers_match_the_float64_reference_dense_and_row_sparse():
    """ApplyMomentum(lr * trust, use_nesterov) with lr = 1 on the dense leaf; SparseApplyMomentum with trust 1
    on the touched rows of the table."""
    params, grads = _problem()
    expected, ref_slots = reference.run(ref.lars(1.0, 0.8, 0.01, 0.1, 1e-3, nesterov=True), params, grads)
    with jax.enable_x64(True):
        tx = gradtx.chain(
            scale_by_lars(0.8, 0.01, 0.1, 1e-3, nesterov=True), gradtx.scale_by_learning_rate(1.0)
        )
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    helpers.assert_trees_close(
        gradtx.get_slot(state, "momentum"), [s["momentum"] for s in ref_slots], rtol=1e-10, atol=1e-10
    )


def test_trust_ratio_is_one_when_a_norm_is_zero():
    """Zero weights or a zero gradient: plain momentum (no 0/0 with eps = 0, no zero step)."""
    tx = scale_by_lars(momentum=0.5, weight_decay=0.0, eeta=0.001, eps=0.0)
    params = {"zero_w": jnp.zeros(3), "zero_g": jnp.ones(3)}
    grads = {"zero_w": jnp.array([1.0, -2.0, 0.5]), "zero_g": jnp.zeros(3)}
    state = ScaleByLarsState(jnp.int32(1), {"zero_w": jnp.zeros(3), "zero_g": jnp.array([2.0, -4.0, 1.0])})
    u, state = jax.jit(tx.update)(grads, state, params)
    np.testing.assert_array_equal(u["zero_w"], grads["zero_w"])
    np.testing.assert_array_equal(u["zero_g"], [1.0, -2.0, 0.5])  # 0.5 * momentum, trust 1
    np.testing.assert_array_equal(state.momentum["zero_g"], [1.0, -2.0, 0.5])


def test_skip_matches_key_path_substrings_and_norms_are_per_leaf():
    """`skip` entries are substrings of "a/0/b" key paths (contrib's skip_list on variable names)."""
    params = {
        "layers": [{"kernel": jnp.full((2, 2), 3.0), "bias": jnp.ones(2)}, {"kernel": jnp.full(4, -0.5)}],
        "batch_normalization": {"gamma": jnp.ones(2)},
        "head": jnp.array([3.0, 4.0]),
    }
    g = jax.tree.map(lambda p: jnp.linspace(0.5, -1.0, p.size).reshape(p.shape), params)
    eeta, wd = 0.02, 0.1
    tx = scale_by_lars(momentum=0.0, weight_decay=wd, eeta=eeta, skip=("bias", "batch_norm", "layers/1/"))
    u, _ = jax.jit(tx.update)(g, tx.init(params), params)
    kernel = _trust(
        np.asarray(params["layers"][0]["kernel"]), np.asarray(g["layers"][0]["kernel"]), eeta, wd, 0
    )
    head = _trust(np.asarray(params["head"]), np.asarray(g["head"]), eeta, wd, 0)
    assert 0 < head < kernel < 1  # each leaf its own norms
    expected = {
        "layers": [
            {"kernel": kernel * np.asarray(g["layers"][0]["kernel"]), "bias": g["layers"][0]["bias"]},
            {"kernel": g["layers"][1]["kernel"]},
        ],
        "batch_normalization": {"gamma": g["batch_normalization"]["gamma"]},
        "head": head * np.asarray(g["head"]),
    }
    helpers.assert_trees_close(u, expected, rtol=1e-6, atol=1e-7)


def test_state_has_tfs_slot_name_starting_at_zero():
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = scale_by_lars().init(params)
    assert type(state) is ScaleByLarsState and state._fields == ("count", "momentum")
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    helpers.assert_trees_close(state.momentum, jax.tree.map(np.zeros_like, params), atol=0)


def test_is_a_per_leaf_rule():
    """The trust ratio looks at whole leaves: under packing it must get per-leaf views."""
    assert isinstance(scale_by_lars(), gradtx.LeafWise)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"momentum": -0.1}, r"`scale_by_lars`: `momentum` must be in \[0.0, 1.0\], got -0.1\."),
        ({"weight_decay": -1.0}, r"`scale_by_lars`: `weight_decay` must be >= 0, got -1.0\."),
        ({"eps": -1.0}, r"`scale_by_lars`: `eps` must be >= 0, got -1.0\."),
        ({"eeta": float("nan")}, r"`scale_by_lars`: `eeta` must be finite, got nan\."),
        ({"eeta": float("inf")}, r"`scale_by_lars`: `eeta` must be finite, got inf\."),
        ({"momentum": float("inf")}, r"`scale_by_lars`: `momentum` must be finite, got inf\."),
    ],
)
def test_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scale_by_lars(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            {"skip": "bias"},
            r"`scale_by_lars`: `skip` must be a list, tuple or set of strings \(key-path substrings\)",
        ),
        ({"skip": ["bias", 1]}, r"`scale_by_lars`: `skip` must be a list, tuple or set of strings"),
        ({"skip": 5}, r"`scale_by_lars`: `skip` must be a list, tuple or set of strings .*got 5\."),
        ({"nesterov": 1}, r"`scale_by_lars`: `nesterov` must be True or False, got 1"),
        ({"eeta": "0.001"}, r"`scale_by_lars`: `eeta` must be a number, a scalar array or a schedule"),
    ],
)
def test_bad_types(kwargs, match):
    with pytest.raises(TypeError, match=match):
        scale_by_lars(**kwargs)


# --------------------------------------------------------------------------- the alias against contrib's rule

CASES = {
    "lars": (
        lambda: gradtx.lars(0.5, 0.9, 1e-3, 0.01, 1e-4),
        lambda: ref.lars(0.5, 0.9, 1e-3, 0.01, 1e-4),
        ["momentum"],
        None,
    ),
    "lars-nesterov": (
        lambda: gradtx.lars(0.5, 0.9, 1e-3, 0.01, nesterov=True),
        lambda: ref.lars(0.5, 0.9, 1e-3, 0.01, nesterov=True),
        ["momentum"],
        None,
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


@SPARSE
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_the_reference(name, sparse, x64):
    make_tx, make_ref, slots, extra = CASES[name]
    helpers.compare_to_reference(
        make_tx, make_ref, sparse=sparse, x64=x64, slots=slots, extra_args=extra, atol32=5e-6
    )


def test_lars_skip_list_uses_the_plain_rate():
    params = {"dense": {"kernel": jnp.ones(3), "bias": jnp.ones(3)}}
    grads = {"dense": {"kernel": jnp.full(3, 0.5), "bias": jnp.full(3, 0.5)}}
    tx = gradtx.lars(0.1, momentum=0.0, weight_decay=0.0, eeta=0.01, skip=["bias"])
    out, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(out["dense"]["bias"], -0.05 * np.ones(3), rtol=1e-6)
    np.testing.assert_allclose(
        out["dense"]["kernel"], -0.1 * 0.01 * 2.0 * 0.5 * np.ones(3), rtol=1e-6
    )  # trust = 0.02


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.lars,
            {"learning_rate": 0.1, "momentum": -0.1},
            r"`lars`: `momentum` must be in \[0.0, 1.0\], got -0.1",
        ),
        (gradtx.lars, {"learning_rate": 0.1, "weight_decay": -1.0}, r"`lars`: `weight_decay` must be >= 0"),
    ],
)
def test_alias_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


def test_alias_bad_types():
    with pytest.raises(TypeError, match=r"`lars`: `skip` must be a list, tuple or set of strings"):
        gradtx.lars(0.1, skip="bias")
    with pytest.raises(TypeError, match=r"`lars`: `skip` must be a list, tuple or set of strings .*got 5\."):
        gradtx.lars(0.1, skip=5)  # was `'int' object is not iterable`
    with pytest.raises(TypeError, match=r"`adamw`: `scale_decay_by_learning_rate` must be True or False"):
        gradtx.adamw(weight_decay=0.1, scale_decay_by_learning_rate=1)
