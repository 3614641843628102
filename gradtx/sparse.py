"""Row-sparse gradients (TF's `IndexedSlices`) and the helpers that produce and apply them.

A `RowSparse` is the gradient of an embedding table that a batch touched in only some
rows. Transforms apply TF's sparse rule to it (most change the touched rows only, see
each optimizer), `apply_updates` scatters it, and under `jax.jit` with donated params and
state one step costs O(touched rows), not O(table).

Indices must lie in `[0, num_rows)`; under jit they cannot be checked, and rows outside
are dropped (TF raises instead).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from gradtx import _checks, _tree


@jax.tree_util.register_pytree_with_keys_class
class RowSparse:
    """A gradient that is zero except in the rows `indices` of a `dense_shape` table.

    Its pytree leaves are `indices` (int32, `[k]`) and `values` (`[k, *row_shape]`);
    `dense_shape` is static. Duplicate indices mean their values add up (TF sums them
    first, and so does every gradtx rule). After `deduplicated()` the indices are unique
    and sorted, padded to length k with `num_rows` (an out-of-range row whose values are 0).

    Args:
      indices: the row of each value, int array of shape `[k]`.
      values: the rows, array of shape `[k, *dense_shape[1:]]`.
      dense_shape: the shape of the table (a tuple of ints).
      unique: whether `indices` are already unique (as `deduplicated()` makes them).

    Raises:
      TypeError: if `indices` is not an integer array.
      ValueError: if the shapes do not fit together.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.sparse import RowSparse
        >>> g = RowSparse(jnp.array([2, 0, 2]), jnp.array([[1.0], [2.0], [3.0]]), (4, 1))
        >>> g.todense()[:, 0]
        Array([2., 0., 4., 0.], dtype=float32)
    """

    _gradtx_row_sparse = True
    __slots__ = ("indices", "values", "dense_shape", "unique")
    indices: jax.Array
    values: jax.Array
    dense_shape: tuple[int, ...]
    unique: bool

    def __init__(self, indices: Any, values: Any, dense_shape: Sequence[int], *, unique: bool = False):
        indices, values = jnp.asarray(indices), jnp.asarray(values)
        dense_shape = tuple(int(d) for d in dense_shape)
        if not jnp.issubdtype(indices.dtype, jnp.integer):
            raise TypeError(f"`RowSparse`: `indices` must be an integer array, got dtype {indices.dtype}.")
        if (
            indices.ndim != 1
            or values.ndim != len(dense_shape)
            or values.shape[0] != indices.shape[0]
            or values.shape[1:] != dense_shape[1:]
        ):
            raise ValueError(
                f"`RowSparse`: `indices` must have shape [k] and `values` shape [k, *dense_shape[1:]]; got "
                f"indices {indices.shape}, values {values.shape}, dense_shape {dense_shape}."
            )
        self._set(indices.astype(jnp.int32), values, dense_shape, unique)

    def _set(self, indices, values, dense_shape, unique):
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "dense_shape", dense_shape)
        object.__setattr__(self, "unique", unique)

    def __setattr__(self, name, value):
        raise AttributeError("RowSparse is immutable; use `with_values`.")

    # pytree protocol: leaves are indices and values; the shape and the flag are static.
    def tree_flatten_with_keys(self):
        """The pytree children `indices` and `values` with their key paths; the shape and flag are static."""
        keys = (jax.tree_util.GetAttrKey("indices"), jax.tree_util.GetAttrKey("values"))
        return tuple(zip(keys, (self.indices, self.values), strict=True)), (self.dense_shape, self.unique)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj._set(children[0], children[1], aux[0], aux[1])
        return obj

    def __repr__(self) -> str:
        return (
            f"RowSparse(indices={self.indices!r}, values={self.values!r}, "
            f"dense_shape={self.dense_shape}, unique={self.unique})"
        )

    @property
    def shape(self) -> tuple[int, ...]:
        """The dense shape."""
        return self.dense_shape

    @property
    def dtype(self) -> Any:
        """The dtype of the values."""
        return self.values.dtype

    @property
    def num_rows(self) -> int:
        """The number of rows of the table (`dense_shape[0]`)."""
        return self.dense_shape[0]

    def with_values(self, values: Any) -> "RowSparse":
        """The same rows with new values (same leading size)."""
        return RowSparse.tree_unflatten((self.dense_shape, self.unique), (self.indices, values))

    def valid(self) -> jax.Array:
        """Boolean mask `[k]`: which entries address a real row (padding does not)."""
        return (self.indices >= 0) & (self.indices < self.num_rows)

    def _rows_or_oob(self) -> jax.Array:
        """The indices with every invalid one (negative or too large) replaced by `num_rows` (dropped)."""
        if self.unique:  # deduplicated() already did it
            return self.indices
        return jnp.where(self.valid(), self.indices, self.num_rows)

    def deduplicated(self) -> "RowSparse":
        """Unique sorted indices, the values of duplicates summed (TF's `unique` + `unsorted_segment_sum`).

        The result keeps length k: missing entries are padded with index `num_rows` and
        zero values, so shapes stay static under jit. Costs O(k log k).
        """
        if self.unique:
            return self
        k = self.indices.shape[0]
        if k == 0:
            return RowSparse.tree_unflatten((self.dense_shape, True), (self.indices, self.values))
        ids = self._rows_or_oob()
        position = lax.iota(jnp.int32, k)
        if (self.num_rows + 1) * k < 2**31:  # one int32 sort key: row * k + position
            key = jnp.sort(ids * k + position)
            sorted_ids, order = key // k, key % k
        else:
            sorted_ids, order = lax.sort((ids, position), num_keys=1)
        first = jnp.concatenate([jnp.ones((1,), bool), sorted_ids[1:] != sorted_ids[:-1]])
        segment = jnp.cumsum(first.astype(jnp.int32)) - 1  # of each sorted entry
        uniq = jnp.full((k,), self.num_rows, jnp.int32).at[segment].set(sorted_ids)
        inverse = jnp.zeros((k,), jnp.int32).at[order].set(segment, unique_indices=True)
        summed = jax.ops.segment_sum(
            self.values, inverse, num_segments=k
        )  # in the order of the entries, as TF
        out = RowSparse.tree_unflatten((self.dense_shape, True), (uniq, summed))
        return out.with_values(out.zero_padding(summed))

    def todense(self) -> jax.Array:
        """The dense gradient (O(table): only for rules that have no sparse form)."""
        return (
            jnp.zeros(self.dense_shape, self.values.dtype)
            .at[self._rows_or_oob()]
            .add(self.values, mode="drop")
        )

    def gather(self, table: jax.Array) -> jax.Array:
        """The rows `indices` of `table` (zeros for padding entries)."""
        return table.at[self._rows_or_oob()].get(mode="fill", fill_value=0)

    def scatter(self, table: jax.Array, rows: jax.Array) -> jax.Array:
        """`table` with its rows `indices` set to `rows` (padding dropped; needs unique indices)."""
        return table.at[self._rows_or_oob()].set(rows.astype(table.dtype), mode="drop")

    def add_to_rows(self, table: jax.Array, rows: jax.Array) -> jax.Array:
        """`table` with `rows` added to its rows `indices` (padding dropped, duplicates accumulate)."""
        return table.at[self._rows_or_oob()].add(rows.astype(table.dtype), mode="drop")

    def scatter_add_into(self, param: jax.Array) -> jax.Array:
        """`param` plus this update in its rows: what `apply_updates` does with a row-sparse update."""
        return self.add_to_rows(param, self.values)

    def zero_padding(self, rows: jax.Array) -> jax.Array:
        """`rows` (`[k, ...]`) with the entries of padding indices set to 0."""
        return jnp.where(_rows(self.valid(), rows), rows, jnp.zeros_like(rows))


def _rows(mask: jax.Array, like: jax.Array) -> jax.Array:
    """A `[k]` mask broadcast against `[k, ...]` rows."""
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))


def apply_rows(
    rule: Callable[..., tuple[jax.Array, ...]],
    grad: RowSparse,
    *slots: jax.Array,
    param: jax.Array | None = None,
) -> tuple[Any, ...]:
    """Apply a dense per-element rule to the touched rows only (TF's `SparseApply*` kernels).

    The gradient is deduplicated; the rows of each slot (and of `param`, when given) are
    gathered, `rule(grad_rows, *slot_rows[, param_rows])` returns
    `(update_rows, *new_slot_rows)`, and the new rows are scattered back. Untouched rows of
    the slots do not change. Costs O(touched rows).

    Args:
      rule: the dense rule, element-wise over rows.
      grad: the row-sparse gradient.
      *slots: the slot tables (shaped like the parameter).
      param: the parameter table, for rules that read it.

    Returns:
      `(update, *new_slots)` where `update` is a `RowSparse` (zero in padding rows).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.sparse import RowSparse, apply_rows
        >>> accum = jnp.ones((3, 1))
        >>> g = RowSparse(jnp.array([2, 2]), jnp.array([[1.0], [2.0]]), (3, 1))  # row 2, twice
        >>> update, accum = apply_rows(lambda g, a: (-g / a, a + g * g), g, accum)
        >>> update.todense()[:, 0], accum[:, 0]
        (Array([ 0.,  0., -3.], dtype=float32), Array([ 1.,  1., 10.], dtype=float32))
    """
    g = grad.deduplicated()
    args = [g.values, *(g.gather(s) for s in slots)]
    if param is not None:
        args.append(g.gather(param))
    update_rows, *new_rows = rule(*args)
    update = g.with_values(g.zero_padding(update_rows))
    return (update, *(g.scatter(s, r) for s, r in zip(slots, new_rows, strict=True)))


def lift(
    rule: Callable[..., tuple[jax.Array, ...]], *, with_param: bool = False
) -> Callable[..., tuple[Any, ...]]:
    """A per-leaf function from a dense per-element rule: dense gradients get `rule`, row-sparse
    ones get it on their touched rows only (`apply_rows`, TF's `SparseApply*` semantics).

    `rule(grad, *slots[, param]) -> (update, *new_slots)`; the returned function takes the
    same positional arguments (the param last when `with_param`).

    Args:
      rule: the dense rule, element-wise.
      with_param: `rule` takes the parameter as its last argument.

    Returns:
      `leaf(grad, *slots[, param]) -> (update, *new_slots)` for dense or `RowSparse` grads.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.sparse import RowSparse, lift
        >>> leaf = lift(lambda g, a: (g / a, a + 1))
        >>> leaf(jnp.array([2.0, 4.0]), jnp.array([1.0, 2.0]))  # dense: the rule everywhere
        (Array([2., 2.], dtype=float32), Array([2., 3.], dtype=float32))
        >>> u, a = leaf(RowSparse(jnp.array([1]), jnp.array([4.0]), (2,)), jnp.array([1.0, 2.0]))
        >>> u.todense(), a  # row-sparse: row 1 only
        (Array([0., 2.], dtype=float32), Array([1., 3.], dtype=float32))
    """

    def leaf(grad, *rest):
        if _tree.is_row_sparse(grad):
            slots, param = (rest[:-1], rest[-1]) if with_param else (rest, None)
            return apply_rows(rule, grad, *slots, param=param)
        return rule(grad, *rest)

    return leaf


def value_and_grad(
    loss_fn: Callable[..., Any],
    lookups: Mapping[str, int],
    *,
    has_aux: bool = False,
) -> Callable[..., tuple[Any, Any]]:
    """Like `jax.value_and_grad(loss_fn)`, but embedding tables get `RowSparse` gradients.

    `loss_fn(params, *args)` must use each table of `lookups` only through row lookups
    (`table[ids]` or `jnp.take(table, ids, axis=0)`) with the integer array `args[i - 1]`,
    where `i = lookups[path]` counts `loss_fn`'s positional arguments (`params` is 0). The
    returned function gathers the touched rows once, lets `loss_fn` look up into them with
    remapped ids, and returns their gradient as a `RowSparse` with unique indices, so no
    table-sized array is made.

    Args:
      loss_fn: the loss; returns a scalar (or `(scalar, aux)` with `has_aux`).
      lookups: table key path (slash-separated, e.g. ``"embed/table"``) -> the position of
        its ids among `loss_fn`'s arguments. Tables sharing one ids argument are allowed
        if they have the same number of rows.
      has_aux: as in `jax.value_and_grad`.

    Returns:
      A function `(params, *args) -> (loss, grads)` (`((loss, aux), grads)` with `has_aux`).

    Raises:
      ValueError: at call time, if a path is not a leaf of `params` or an argument position
        is out of range.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> params = {"emb": jnp.ones((1000, 4)), "w": jnp.ones(4)}
        >>> loss = lambda p, ids: jnp.sum(p["emb"][ids] @ p["w"])
        >>> value, grads = gradtx.sparse.value_and_grad(loss, {"emb": 1})(params, jnp.array([3, 7, 3]))
        >>> float(value), grads["emb"].values.shape, grads["emb"].dense_shape
        (12.0, (3, 4), (1000, 4))
    """
    _checks.check_callable("value_and_grad", "loss_fn", loss_fn)
    if not isinstance(lookups, Mapping) or not lookups:
        raise TypeError(
            f"`value_and_grad`: `lookups` must be a non-empty dict path -> argument position, "
            f"got {lookups!r}."
        )
    for path, pos in lookups.items():
        _checks.check_int("value_and_grad", f"lookups[{path!r}]", pos, minimum=1)

    def wrapped(params, *args):
        leaves = {_tree.path_str(p): (p, x) for p, x in jax.tree_util.tree_flatten_with_path(params)[0]}
        args = list(args)
        remapped: dict[int, tuple[jax.Array, jax.Array, int]] = {}
        rows_of: dict[str, tuple[jax.Array, int]] = {}
        for path, pos in lookups.items():
            if path not in leaves:
                raise ValueError(
                    f"`value_and_grad`: `lookups` names {path!r}, which is not a leaf of params; "
                    f"leaves: {sorted(leaves)}."
                )
            if pos > len(args):
                raise ValueError(
                    f"`value_and_grad`: `lookups[{path!r}]` = {pos}, but the loss got {len(args)} "
                    f"argument(s) after params."
                )
            table = leaves[path][1]
            if pos not in remapped:
                ids = jnp.asarray(args[pos - 1])
                flat = ids.reshape(-1)
                uniq, inverse = jnp.unique(flat, size=flat.shape[0], fill_value=-1, return_inverse=True)
                remapped[pos] = (uniq, inverse.reshape(ids.shape), table.shape[0])
            uniq, _, n = remapped[pos]
            if n != table.shape[0]:
                raise ValueError(
                    f"`value_and_grad`: tables sharing ids argument {pos} must have the same "
                    f"number of rows; {path!r} has {table.shape[0]}, another has {n}."
                )
            rows_of[path] = (jnp.where(uniq >= 0, uniq, n).astype(jnp.int32), n)
        for pos, (_, inverse, _) in remapped.items():
            args[pos - 1] = inverse

        def substituted(p):
            return jax.tree_util.tree_map_with_path(
                lambda kp, x: (
                    x.at[rows_of[_tree.path_str(kp)][0]].get(mode="fill", fill_value=0)
                    if _tree.path_str(kp) in rows_of
                    else x
                ),
                p,
            )

        small = substituted(params)
        out, grads = jax.value_and_grad(loss_fn, has_aux=has_aux)(small, *args)

        def to_sparse(kp, g):
            name = _tree.path_str(kp)
            if name not in rows_of:
                return g
            idx, n = rows_of[name]
            shape = (n,) + g.shape[1:]
            return RowSparse.tree_unflatten((shape, True), (idx, g))

        return out, jax.tree_util.tree_map_with_path(to_sparse, grads)

    return wrapped


def densify(tree: Any) -> Any:
    """Every `RowSparse` leaf of `tree` as a dense array (for rules with no sparse form).

    Args:
      tree: a pytree whose leaves may be `RowSparse`.

    Returns:
      The same tree with each `RowSparse` replaced by its `todense()`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.sparse import RowSparse, densify
        >>> emb = RowSparse(jnp.array([0, 0]), jnp.ones((2, 1)), (2, 1))
        >>> densify({"emb": emb, "b": jnp.ones(1)})["emb"][:, 0]
        Array([2., 0.], dtype=float32)
    """
    return jax.tree.map(
        lambda x: x.todense() if _tree.is_row_sparse(x) else x, tree, is_leaf=_tree.is_row_sparse
    )


def random_row_sparse(
    key: jax.Array, dense_shape: Sequence[int], k: int, dtype: Any = jnp.float32
) -> RowSparse:
    """A random `RowSparse` with `k` (possibly repeated) rows: for tests, examples and benchmarks.

    Args:
      key: a JAX PRNG key.
      dense_shape: the shape of the table.
      k: the number of entries (row indices uniform in `[0, dense_shape[0])`).
      dtype: the dtype of the values (standard normal).

    Returns:
      A `RowSparse` with `k` entries.

    Example:
        >>> import jax
        >>> from gradtx.sparse import random_row_sparse
        >>> g = random_row_sparse(jax.random.key(0), (1000, 4), 8)
        >>> g.indices.shape, g.values.shape, g.dense_shape
        ((8,), (8, 4), (1000, 4))
    """
    k_idx, k_val = jax.random.split(key)
    idx = jax.random.randint(k_idx, (k,), 0, dense_shape[0])
    return RowSparse(idx, jax.random.normal(k_val, (k, *dense_shape[1:]), dtype), tuple(dense_shape))


__all__ = ["RowSparse", "apply_rows", "densify", "lift", "random_row_sparse", "value_and_grad"]
