"""gradtx/_algorithms/normalized_sgd.py: scale_by_l2_normalization (`tf.nn.l2_normalize` of each gradient,
RETURNN's NormalizedSGD) as a building block, and the alias `normalized_sgd` against the float64 reference
of RETURNN's rule.

Here: the block's numbers in float64 (a row-sparse leaf, normalized over its values as they are, and a dense
leaf in one tree), the `eps` bound and its schedule, the duplicated rows, low-precision gradients summed in
float32, the state, and the errors; the alias's numbers against tests/reference_contrib.py in float32 and
float64, dense and row-sparse, and its errors.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
from gradtx.transforms import ScaleByL2NormalizationState, scale_by_l2_normalization
from tests import helpers, reference
from tests import reference_contrib as ref

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def test_numbers_match_the_float64_reference_dense_and_row_sparse():
    params, grads = _problem()
    expected, _ = reference.run(ref.normalized_sgd(1.0), params, grads)
    with jax.enable_x64(True):
        tx = gradtx.chain(scale_by_l2_normalization(), gradtx.scale_by_learning_rate(1.0))
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, _ = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")


def test_duplicated_rows_are_normalized_as_values():
    """The values [3], [4] of row 0 are normalized by 5 and then added: 1.4, not the summed row's 1."""
    g = RowSparse(jnp.array([0, 0]), jnp.array([[3.0], [4.0]]), (2, 1))
    u, _ = jax.jit(scale_by_l2_normalization().update)(g, ())
    np.testing.assert_allclose(u.values[:, 0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(u.todense()[:, 0], [1.4, 0.0], rtol=1e-6)


def test_eps_bounds_the_squared_norm_and_may_be_a_schedule():
    """u = g / sqrt(max(sum g^2, eps)): a zero gradient stays 0; a schedule sees count = t - 1."""
    tx = scale_by_l2_normalization(lambda count: jnp.where(count == 0, 100.0, 1e-12))
    state = tx.init(jnp.zeros(2))
    assert type(state) is ScaleByL2NormalizationState and state._fields == ("count",)
    update = jax.jit(tx.update)
    u1, state = update(jnp.array([3.0, 4.0]), state)  # 25 < 100: divided by 10
    u2, state = update(jnp.array([3.0, 4.0]), state)
    u3, state = update(jnp.zeros(2), state)
    np.testing.assert_allclose(u1, [0.3, 0.4], rtol=1e-6)
    np.testing.assert_allclose(u2, [0.6, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(u3, [0.0, 0.0])
    assert int(state.count) == 3


def test_a_constant_eps_keeps_no_state():
    assert scale_by_l2_normalization(1e-6).init({"w": jnp.ones(3)}) == gradtx.EmptyState()


def test_each_leaf_is_normalized_by_its_own_norm():
    assert isinstance(scale_by_l2_normalization(), gradtx.LeafWise)
    u, _ = jax.jit(scale_by_l2_normalization().update)(
        {"a": jnp.array([3.0, 4.0]), "b": jnp.array([-2.0])}, ()
    )
    helpers.assert_trees_close(u, {"a": np.array([0.6, 0.8]), "b": np.array([-1.0])}, rtol=1e-6)


def test_low_precision_gradients_are_summed_in_float32():
    """float16: summed in its own dtype the squares of 300 would overflow (9e4 > 65504); bfloat16 has
    float32's range, so its float32 sum is seen in the program: the squares are summed as float32."""
    g = jnp.full(1000, 300.0, jnp.float16)
    u, _ = jax.jit(scale_by_l2_normalization().update)(g, ())
    assert u.dtype == jnp.float16
    np.testing.assert_allclose(np.asarray(u, np.float64), np.full(1000, 1 / np.sqrt(1000)), rtol=2**-10)
    g = jnp.linspace(-1.0, 2.0, 64).astype(jnp.bfloat16)
    jaxpr = str(jax.make_jaxpr(lambda g: scale_by_l2_normalization().update(g, ())[0])(g))
    sums = re.findall(r"(\w+)\[\] = reduce_sum", jaxpr)
    assert sums == ["f32"], jaxpr
    u, _ = jax.jit(scale_by_l2_normalization().update)(g, ())
    assert u.dtype == jnp.bfloat16
    expected = np.asarray(g, np.float64) / np.linalg.norm(np.asarray(g, np.float64))
    np.testing.assert_allclose(np.asarray(u, np.float64), expected, rtol=2**-7, atol=2**-12)


@pytest.mark.parametrize(
    "eps, match",
    [
        (-1.0, r"`scale_by_l2_normalization`: `eps` must be >= 0, got -1.0\."),
        (float("nan"), r"`scale_by_l2_normalization`: `eps` must be finite, got nan\."),
        (float("inf"), r"`scale_by_l2_normalization`: `eps` must be finite, got inf\."),
    ],
)
def test_bad_values(eps, match):
    with pytest.raises(ValueError, match=match):
        scale_by_l2_normalization(eps)


def test_bad_types():
    with pytest.raises(
        TypeError, match=r"`scale_by_l2_normalization`: `eps` must be a number, a scalar array or"
    ):
        scale_by_l2_normalization("1e-12")


# --------------------------------------------------------------------------- the alias against RETURNN's rule

CASES = {
    "normalized_sgd": (lambda: gradtx.normalized_sgd(0.1), lambda: ref.normalized_sgd(0.1), []),
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_returnns_rule(name, sparse, x64):
    make_tx, make_ref, slots = CASES[name]
    helpers.compare_to_reference(make_tx, make_ref, sparse=sparse, x64=x64, slots=slots)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.normalized_sgd, {"learning_rate": -1.0}, r"`normalized_sgd`: `learning_rate` must be >= 0"),
    ],
)
def test_alias_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
