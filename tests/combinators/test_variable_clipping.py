"""gradtx/combinators/_variable_clipping.py: `clip_variables`, TF's VariableClippingOptimizer projection."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse


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
