"""The contract every registered factory keeps with row-sparse gradients: the rule its entry declares.

`entry.sparse` says what a `RowSparse` gradient does (`dense`, `all_rows`, `rows`,
`decayed_rows`, `entries`, `values`, or `custom`); each is checked against a dense or
per-row reference, and every `custom` rule against a reference of its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers
from tests.test_contract import BY_ENTRY, _apply, _built


def _sparse_problem(indices=(1, 4, 4, 6)):
    """An embedding-like table ("kernel", 8 rows) with a row-sparse gradient, and a dense vector ("bias")."""
    rng = np.random.default_rng(5)
    params = {
        "dense": {
            "kernel": jnp.asarray(rng.standard_normal((8, 3)), jnp.float32),
            "bias": jnp.asarray(rng.standard_normal(4), jnp.float32),
        }
    }
    idx = jnp.array(indices)
    vals = jnp.asarray(rng.standard_normal((len(indices), 3)), jnp.float32)
    grads = {
        "dense": {
            "kernel": RowSparse(idx, vals, (8, 3)),
            "bias": jnp.asarray(rng.standard_normal(4), jnp.float32),
        }
    }
    return params, grads


def _densified(grads):
    return {"dense": {**grads["dense"], "kernel": grads["dense"]["kernel"].todense()}}


def _check_rows(step, tx, params, grads, new, state):
    """Only the touched rows change, exactly as the dense rule applied to those rows alone."""
    table, new_table = params["dense"]["kernel"], new["dense"]["kernel"]
    rows = np.unique(np.asarray(grads["dense"]["kernel"].indices))
    untouched = np.setdiff1d(np.arange(8), rows)
    np.testing.assert_array_equal(new_table[untouched], table[untouched])
    sub = {"dense": {"kernel": table[rows], "bias": params["dense"]["bias"]}}
    sub_grads = {
        "dense": {"kernel": _densified(grads)["dense"]["kernel"][rows], "bias": grads["dense"]["bias"]}
    }
    expected, _ = step(sub, tx.init(sub), sub_grads, 0)
    helpers.assert_trees_close(new_table[rows], expected["dense"]["kernel"], rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(new["dense"]["bias"], expected["dense"]["bias"], rtol=0, atol=0)
    # a second step on other rows leaves the rows of neither step alone
    g2 = {"dense": {**grads["dense"], "kernel": RowSparse(jnp.array([0, 0]), jnp.ones((2, 3)), (8, 3))}}
    newer, _ = step(new, state, g2, 1)
    never = np.setdiff1d(untouched, [0])
    np.testing.assert_array_equal(newer["dense"]["kernel"][never], table[never])
    np.testing.assert_array_equal(newer["dense"]["kernel"][rows], new_table[rows])


def _check_decayed_rows(step, tx, params, grads, new, state):
    """The slots follow the dense rule on every row; the params move on the touched rows only."""
    expected, expected_state = step(params, tx.init(params), _densified(grads), 0)
    helpers.assert_trees_close(state, expected_state, rtol=1e-6, atol=1e-7)
    rows = np.unique(np.asarray(grads["dense"]["kernel"].indices))
    untouched = np.setdiff1d(np.arange(8), rows)
    table, new_table = params["dense"]["kernel"], new["dense"]["kernel"]
    np.testing.assert_array_equal(new_table[untouched], table[untouched])
    helpers.assert_trees_close(new_table[rows], expected["dense"]["kernel"][rows], rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(new["dense"]["bias"], expected["dense"]["bias"], rtol=1e-6, atol=1e-7)


def _check_values(entry, tx, params, grads, new):
    """The rule sees the values as they are (duplicates included); their updates go to their rows."""
    g = grads["dense"]["kernel"]
    as_dense = {"dense": {"kernel": g.values, "bias": grads["dense"]["bias"]}}
    like = {"dense": {"kernel": jnp.zeros_like(g.values), "bias": params["dense"]["bias"]}}
    u, _ = tx.update(as_dense, tx.init(like), like, **entry.extra(0))
    kernel = params["dense"]["kernel"].at[g.indices].add(u["dense"]["kernel"])
    helpers.assert_trees_close(new["dense"]["kernel"], kernel, rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(
        new["dense"]["bias"], params["dense"]["bias"] + u["dense"]["bias"], rtol=1e-6, atol=1e-7
    )


def _lars_rows(entry, step, tx, params, grads, new, state):
    """LARS: plain momentum (trust ratio 1) with the unscaled rate on the touched rows; dense bias as LARS."""
    ex = entry.example
    momentum = gradtx.trace(ex["momentum"])  # the building block: the direction, not yet descending
    if "learning_rate" in ex:  # the alias
        momentum = gradtx.chain(momentum, gradtx.scale_by_learning_rate(ex["learning_rate"]))
    rows = np.unique(np.asarray(grads["dense"]["kernel"].indices))
    sub = {"kernel": params["dense"]["kernel"][rows]}
    u, _ = momentum.update({"kernel": _densified(grads)["dense"]["kernel"][rows]}, momentum.init(sub), sub)
    helpers.assert_trees_close(
        new["dense"]["kernel"][rows], sub["kernel"] + u["kernel"], rtol=1e-6, atol=1e-7
    )
    dense_bias, _ = step(params, tx.init(params), _densified(grads), 0)  # a per-tensor rule: bias alone
    helpers.assert_trees_close(new["dense"]["bias"], dense_bias["dense"]["bias"], rtol=1e-6, atol=1e-7)


def _adamw_rows(entry, step, tx, params, grads, new, state):
    """AdamW: the decay reaches the touched rows only; then TF1 Adam, whose sparse step moves every row."""
    ex = entry.example
    adam = gradtx.adam(ex["learning_rate"])
    u, _ = adam.update(_densified(grads), adam.init(params), params)
    rows = np.unique(np.asarray(grads["dense"]["kernel"].indices))
    mask = np.zeros((8, 1), np.float32)
    mask[rows] = 1.0
    decay = {"dense": {"kernel": mask * params["dense"]["kernel"], "bias": params["dense"]["bias"]}}
    expected = jax.tree.map(lambda p, a, d: p + a - ex["weight_decay"] * d, params, u, decay)
    helpers.assert_trees_close(new, expected, rtol=1e-6, atol=1e-6)


def _schedule_free_sgd_rows(entry, step, tx, params, grads, new, state):
    """Schedule-free SGD: the decay reaches the touched rows only (add_decayed_weights), then a dense step."""
    ex = entry.example
    rows = np.unique(np.asarray(grads["dense"]["kernel"].indices))
    mask = np.zeros((8, 1), np.float32)
    mask[rows] = 1.0
    decay = {"dense": {"kernel": mask * params["dense"]["kernel"], "bias": params["dense"]["bias"]}}
    decayed = jax.tree.map(lambda g, d: g + ex["weight_decay"] * d, _densified(grads), decay)
    plain = gradtx.schedule_free_sgd(**{**ex, "weight_decay": None})
    u, _ = plain.update(decayed, plain.init(params), params)
    helpers.assert_trees_close(new, gradtx.apply_updates(params, u), rtol=1e-6, atol=1e-6)


def _as_dense(entry, step, tx, params, grads, new, state):
    """Around SGD, a wrapper's numbers on a row-sparse gradient equal those on the densified one."""
    expected, _ = step(params, tx.init(params), _densified(grads), 0)
    helpers.assert_trees_close(new, expected, rtol=1e-6, atol=1e-7)


def _madgrad_rows(entry, step, tx, params, grads, new, state):
    """MADGRAD: the decay reaches the touched rows only (add_decayed_weights), then a dense step."""
    ex = entry.example
    rows = np.unique(np.asarray(grads["dense"]["kernel"].indices))
    mask = np.zeros((8, 1), np.float32)
    mask[rows] = 1.0
    decay = {"dense": {"kernel": mask * params["dense"]["kernel"], "bias": params["dense"]["bias"]}}
    decayed = jax.tree.map(lambda g, d: g + ex["weight_decay"] * d, _densified(grads), decay)
    plain = gradtx.madgrad(**{**ex, "weight_decay": 0.0})
    u, _ = plain.update(decayed, plain.init(params), params)
    helpers.assert_trees_close(new, gradtx.apply_updates(params, u), rtol=1e-6, atol=1e-6)


def _fromage_rows(entry, step, tx, params, grads, new, state):
    """Fromage: the trust-ratio step on the densified gradient; the shrink reaches the touched rows only."""
    ex = entry.example
    mult = 1 / np.sqrt(1 + ex["learning_rate"] ** 2)
    inner = gradtx.chain(
        gradtx.scale_by_trust_ratio(ex["min_norm"]), gradtx.scale_by_learning_rate(ex["learning_rate"] * mult)
    )
    u, _ = inner.update(_densified(grads), inner.init(params), params)
    rows = np.unique(np.asarray(grads["dense"]["kernel"].indices))
    mask = np.zeros((8, 1), np.float32)
    mask[rows] = 1.0
    decay = {"dense": {"kernel": mask * params["dense"]["kernel"], "bias": params["dense"]["bias"]}}
    expected = jax.tree.map(lambda p, a, d: p + a - (1 - mult) * d, params, u, decay)
    helpers.assert_trees_close(new, expected, rtol=1e-6, atol=1e-6)


CUSTOM_SPARSE = {
    "lars": _lars_rows,
    "scale_by_lars": _lars_rows,
    "adamw": _adamw_rows,
    "schedule_free_sgd": _schedule_free_sgd_rows,
    "madgrad": _madgrad_rows,
    "fromage": _fromage_rows,
    "model_average": _as_dense,
    "elastic_average": _as_dense,
    "agn": _as_dense,
}
"""The reference each entry with a rule of its own (`sparse="custom"`) is checked against."""


@BY_ENTRY
def test_row_sparse_gradients_follow_the_declared_rule(entry):
    """`entry.sparse` says what a RowSparse gradient does; check its numbers against a reference."""
    entry, tx, _ = _built(entry.name)
    params, grads = _sparse_problem((1, 4, 6, 2) if entry.sparse == "entries" else (1, 4, 4, 6))

    def step(p, s, g, t):  # eager: a sparse and a dense call would be two compilations
        return _apply(entry, tx, p, s, g, t)

    new, state = step(params, tx.init(params), grads, 0)
    if entry.sparse in ("dense", "all_rows"):
        expected, _ = step(params, tx.init(params), _densified(grads), 0)
        helpers.assert_trees_close(new, expected, rtol=1e-6, atol=1e-6)  # XLA may fuse the paths differently
    elif entry.sparse == "rows":
        _check_rows(step, tx, params, grads, new, state)
    elif entry.sparse in ("decayed_rows", "entries"):  # "entries" equals it for unique indices
        _check_decayed_rows(step, tx, params, grads, new, state)
    elif entry.sparse == "values":
        _check_values(entry, tx, params, grads, new)
    else:
        assert entry.name in CUSTOM_SPARSE, f"{entry.name}: a custom sparse rule needs a reference here"
        CUSTOM_SPARSE[entry.name](entry, step, tx, params, grads, new, state)
    assert jax.tree.structure(state) == jax.tree.structure(tx.init(params))
