"""gradtx/sparse/: RowSparse, deduplication, the gradient helper, O(touched rows) steps."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse, value_and_grad
from tests import catalog, helpers, reference


def test_row_sparse_is_a_pytree_of_indices_and_values():
    g = RowSparse(jnp.array([3, 1]), jnp.ones((2, 4)), (5, 4))
    leaves, treedef = jax.tree.flatten(g)
    assert len(leaves) == 2 and leaves[0].dtype == jnp.int32
    assert jax.tree.unflatten(treedef, leaves).dense_shape == (5, 4)
    assert g.shape == (5, 4) and g.dtype == jnp.float32 and g.num_rows == 5
    doubled = jax.jit(lambda x: x.with_values(x.values * 2))(g)
    np.testing.assert_array_equal(doubled.todense()[3], 2 * np.ones(4))
    assert "RowSparse(indices=" in repr(g)
    with pytest.raises(AttributeError, match="immutable"):
        g.values = jnp.zeros((2, 4))


@pytest.mark.parametrize(
    "args, error, match",
    [
        (
            (jnp.array([0.0]), jnp.ones((1, 2)), (3, 2)),
            TypeError,
            r"`RowSparse`: `indices` must be an integer array",
        ),
        ((jnp.array([0, 1]), jnp.ones((1, 2)), (3, 2)), ValueError, r"`indices` must have shape \[k\]"),
        ((jnp.array([0]), jnp.ones((1, 3)), (3, 2)), ValueError, r"values \(1, 3\), dense_shape \(3, 2\)"),
    ],
)
def test_row_sparse_checks_its_shapes(args, error, match):
    with pytest.raises(error, match=match):
        RowSparse(*args)


@pytest.mark.parametrize("num_rows", [7, 2**30])  # one packed int32 sort key; a (row, position) sort
def test_deduplication_sums_duplicates_like_tf(num_rows):
    idx = np.array([5, 0, 2, 2, 5, 5])
    vals = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    d = jax.jit(lambda i, v: RowSparse(i, v, (num_rows, 2)).deduplicated())(idx, vals)
    rows, summed = reference.dedup(idx, vals)
    np.testing.assert_array_equal(d.indices[:3], rows)
    np.testing.assert_array_equal(d.values[:3], summed)
    np.testing.assert_array_equal(d.indices[3:], [num_rows] * 3)  # padding: an out-of-range row...
    np.testing.assert_array_equal(d.values[3:], np.zeros((3, 2)))  # ...with zero values
    assert d.unique and d.deduplicated() is d
    if num_rows == 7:
        np.testing.assert_array_equal(d.todense(), RowSparse(idx, vals, (7, 2)).todense())


def test_out_of_range_rows_are_dropped():
    g = RowSparse(jnp.array([1, 9, -1]), jnp.ones((3, 2)), (4, 2))
    np.testing.assert_array_equal(g.todense().sum(), 2.0)
    np.testing.assert_array_equal(g.deduplicated().todense(), g.todense())


def test_apply_updates_scatters_rows_and_accumulates_duplicates():
    params = {"emb": jnp.zeros((4, 2), jnp.bfloat16)}
    updates = {"emb": RowSparse(jnp.array([1, 3, 1]), jnp.ones((3, 2)), (4, 2))}
    out = gradtx.apply_updates(params, updates)["emb"]
    assert out.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(out, np.float32)[:, 0], [0, 2, 0, 1])


def _embedding_loss(params, ids, labels):
    emb = params["emb"][ids]  # [batch, 2, dim]
    logits = emb.sum(axis=1) @ params["w"]
    return jnp.mean((logits - labels) ** 2), logits


@pytest.mark.parametrize("name", ["ftrl", "lazy_adam", "proximal_adagrad", "adagrad_da", "adamw"])
def test_an_eager_step_on_numpy_params_takes_row_sparse_gradients(name):
    """Outside jit, params and slots may be NumPy arrays; the row updates must not need `.at` on them."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    grads = RowSparse(jnp.array([1, 3, 1]), jnp.ones((3, 3)), (4, 3))
    tx = gradtx.get(name, learning_rate=0.1, **({"weight_decay": 0.01} if name == "adamw" else {}))
    state = jax.tree.map(np.asarray, tx.init(table))  # as a loader gives it back
    eager = gradtx.apply_updates(table, tx.update(grads, state, table)[0])
    jitted = jax.jit(lambda p, s, g: gradtx.apply_updates(p, tx.update(g, s, p)[0]))(table, state, grads)
    np.testing.assert_allclose(eager, jitted, rtol=1e-6, atol=1e-7)
    if name in ("ftrl", "lazy_adam", "proximal_adagrad"):  # the rules that move touched rows only
        np.testing.assert_array_equal(np.asarray(eager)[[0, 2]], table[[0, 2]])


def test_value_and_grad_equals_the_dense_gradient():
    rng = np.random.default_rng(0)
    params = {
        "emb": jnp.asarray(rng.standard_normal((50, 4)), jnp.float32),
        "w": jnp.asarray(rng.standard_normal(4), jnp.float32),
    }
    ids = jnp.array([[3, 7], [7, 7], [49, 0]])
    labels = jnp.array([1.0, -1.0, 0.5])
    (loss, aux), grads = jax.jit(value_and_grad(_embedding_loss, {"emb": 1}, has_aux=True))(
        params, ids, labels
    )
    (loss_d, aux_d), grads_d = jax.value_and_grad(_embedding_loss, has_aux=True)(params, ids, labels)
    np.testing.assert_allclose(loss, loss_d, rtol=1e-6)
    np.testing.assert_allclose(aux, aux_d, rtol=1e-6)
    assert isinstance(grads["emb"], RowSparse) and grads["emb"].unique
    assert grads["emb"].values.shape == (6, 4)  # one row per looked-up id, no table-sized array
    np.testing.assert_allclose(grads["emb"].todense(), grads_d["emb"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grads["w"], grads_d["w"], rtol=1e-6)


def test_value_and_grad_with_two_tables_sharing_ids():
    params = {"a": jnp.ones((10, 2)), "b": 2 * jnp.ones((10, 2))}

    def loss(p, ids):
        return jnp.sum(p["a"][ids] * p["b"][ids])

    ids = jnp.array([1, 1, 4])
    _, grads = value_and_grad(loss, {"a": 1, "b": 1})(params, ids)
    dense = jax.grad(loss)(params, ids)
    for k in "ab":
        np.testing.assert_allclose(grads[k].todense(), dense[k])


def test_value_and_grad_errors():
    with pytest.raises(TypeError, match=r"`value_and_grad`: `lookups` must be a non-empty dict"):
        value_and_grad(_embedding_loss, {})
    with pytest.raises(ValueError, match=r"`value_and_grad`: `lookups\['emb'\]` must be >= 1, got 0"):
        value_and_grad(_embedding_loss, {"emb": 0})
    fn = value_and_grad(lambda p, ids: jnp.sum(p["emb"][ids]), {"table": 1})
    with pytest.raises(
        ValueError, match=r"`lookups` names 'table', which is not a leaf of params; leaves: \['emb'\]"
    ):
        fn({"emb": jnp.ones((3, 2))}, jnp.array([0]))
    fn = value_and_grad(lambda p, ids: jnp.sum(p["emb"][ids]), {"emb": 2})
    with pytest.raises(ValueError, match=r"`lookups\['emb'\]` = 2, but the loss got 1 argument"):
        fn({"emb": jnp.ones((3, 2))}, jnp.array([0]))


@pytest.mark.parametrize("name", ["ftrl", "adagrad", "lazy_rows_adam"])
def test_embedding_model_trains_on_row_sparse_gradients_in_a_donated_step(name):
    """The issue's user story: an embedding model, RowSparse gradients from the helper, jit + donation."""
    tx = {
        "ftrl": gradtx.ftrl(0.5, l1=1e-4),
        "adagrad": gradtx.adagrad(0.5),
        "lazy_rows_adam": gradtx.chain(gradtx.scale_by_lazy_adam(), gradtx.scale_by_learning_rate(0.05)),
    }[name]
    rng = np.random.default_rng(1)
    n_rows, dim = 1000, 8
    true_emb = rng.standard_normal((n_rows, dim)).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    params = {"emb": jnp.zeros((n_rows, dim)), "w": jnp.asarray(w)}
    grad_fn = value_and_grad(lambda p, ids, y: jnp.mean((p["emb"][ids].sum(1) @ p["w"] - y) ** 2), {"emb": 1})

    @jax.jit
    def step(params, state, ids, y):
        loss, grads = grad_fn(params, ids, y)
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    state = tx.init(params)
    hot = np.arange(64)  # the batch only ever touches these rows
    losses = []
    for _ in range(150):
        ids = rng.choice(hot, size=(32, 2))
        y = (true_emb[ids].sum(1) @ w).astype(np.float32)
        params, state, loss = step(params, state, jnp.asarray(ids), jnp.asarray(y))
        losses.append(float(loss))
    assert np.mean(losses[-10:]) < 0.1 * np.mean(losses[:10])
    np.testing.assert_array_equal(np.asarray(params["emb"])[64:], 0.0)  # untouched rows never moved


def test_sparse_step_equals_dense_on_touched_rows_and_needs_no_table_sized_temporaries():
    """Semantics on a large table; cost is shown by the compiled step's temporary memory (O(k), not
    O(table))."""
    n_rows, dim, k = 200_000, 16, 256
    table_bytes = n_rows * dim * 4
    tx = gradtx.adagrad(0.1)
    params = {"emb": jnp.asarray(np.random.default_rng(0).standard_normal((n_rows, dim)), jnp.float32)}
    g = gradtx.sparse.random_row_sparse(jax.random.key(0), (n_rows, dim), k)

    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    sparse_step = jax.jit(step, donate_argnums=(0, 1))
    compiled = sparse_step.lower(params, tx.init(params), {"emb": g}).compile()
    memory = compiled.memory_analysis()
    if memory is not None:
        assert memory.temp_size_in_bytes < table_bytes / 20, memory
    dense_new, dense_state = jax.jit(step)(params, tx.init(params), {"emb": g.todense()})
    rows = np.unique(np.asarray(g.indices))
    new, state = sparse_step(jax.tree.map(jnp.copy, params), tx.init(params), {"emb": g})
    helpers.assert_trees_close(new["emb"][rows], dense_new["emb"][rows], rtol=1e-6, atol=1e-7)
    untouched = np.setdiff1d(np.arange(n_rows), rows)
    np.testing.assert_array_equal(new["emb"][untouched], params["emb"][untouched])
    # dense Adagrad adds g^2 = 0 to every untouched accumulator: the same numbers
    helpers.assert_trees_close(
        gradtx.get_slot(state, "accumulator"), gradtx.get_slot(dense_state, "accumulator"), rtol=1e-6
    )


def test_densify_turns_row_sparse_leaves_into_arrays():
    tree = {"a": RowSparse(jnp.array([1]), jnp.ones((1, 2)), (3, 2)), "b": jnp.ones(2)}
    out = gradtx.sparse.densify(tree)
    np.testing.assert_array_equal(out["a"], [[0, 0], [1, 1], [0, 0]])
    assert out["b"] is tree["b"]


_ROWS = [e for e in catalog.entries("optimizer") if e.sparse == "rows"]
_IN_PLACE = {"parameter", "bitcast", "tuple", "get-tuple-element", "scatter", "dynamic-update-slice"}


def table_sized_work(hlo: str, shape: str) -> list[str]:
    """The instructions of the compiled step's entry computation that produce a `shape` array other than in
    place.

    Allowed: the parameters themselves, bitcasts, and scatters / dynamic-update-slices
    (alone or as the root of a fusion) -- XLA runs those in place in the donated buffer,
    touching only the scattered rows. Anything else of the table's shape is O(table) work.
    """
    computations, name = {}, None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%(\S+) ", line)
        if head:
            name = "ENTRY" if line.startswith("ENTRY") else head.group(1)
            computations[name] = []
        elif name and " = " in line:
            computations[name].append(line.strip())
    root_op = {
        n: _type_and_op(line)[1]
        for n, body in computations.items()
        for line in body
        if line.startswith("ROOT")
    }
    bad = []
    for line in computations["ENTRY"]:
        result, op = _type_and_op(line)
        if not result.startswith(shape) or op in _IN_PLACE:
            continue
        called = re.search(r"calls=%([\w.-]+)", line)
        if op == "fusion" and called and root_op.get(called.group(1)) in _IN_PLACE:
            continue
        bad.append(line[:160])
    return bad


def _type_and_op(line: str) -> tuple[str, str]:
    """`("f32[4,2]{1,0}", "fusion")` from an HLO instruction line (tuple types in parentheses)."""
    rhs = line.split(" = ", 1)[1]
    if rhs.startswith("("):
        depth = 0
        for i, ch in enumerate(rhs):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return rhs[: i + 1], rhs[i + 1 :].split("(", 1)[0].strip()
    result, rest = rhs.split(" ", 1)
    return result, rest.split("(", 1)[0].strip()


@pytest.mark.parametrize("entry", _ROWS, ids=[e.name for e in _ROWS])
def test_every_touched_rows_optimizer_steps_in_o_of_touched_rows(entry):
    """A donated step with a RowSparse gradient does no work of the table's size and allocates no such
    temporary."""
    n_rows, dim, k = 100_000, 16, 128
    tx = entry.build()
    params = {"emb": jax.ShapeDtypeStruct((n_rows, dim), jnp.float32)}
    grads = {"emb": gradtx.sparse.random_row_sparse(jax.random.key(1), (n_rows, dim), k)}

    def step(params, state, grads):
        updates, state = tx.update(grads, state, params, **entry.extra(0))
        return gradtx.apply_updates(params, updates), state

    state = jax.eval_shape(tx.init, params)
    compiled = jax.jit(step, donate_argnums=(0, 1)).lower(params, state, grads).compile()
    assert table_sized_work(compiled.as_text(), f"f32[{n_rows},{dim}]") == []
    memory = compiled.memory_analysis()
    if memory is not None:
        assert memory.temp_size_in_bytes < n_rows * dim * 4 / 20, memory
        assert memory.output_size_in_bytes - memory.alias_size_in_bytes < n_rows * dim * 4 / 20, (
            memory
        )  # donated


def test_the_o_of_touched_rows_check_sees_dense_work():
    tx = gradtx.adam(0.1)  # TF1 Adam: every row's moments decay, every row moves
    params = {"emb": jax.ShapeDtypeStruct((1000, 4), jnp.float32)}
    grads = {"emb": gradtx.sparse.random_row_sparse(jax.random.key(1), (1000, 4), 8)}

    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    hlo = (
        jax.jit(step, donate_argnums=(0, 1))
        .lower(params, jax.eval_shape(tx.init, params), grads)
        .compile()
        .as_text()
    )
    assert table_sized_work(hlo, "f32[1000,4]")
