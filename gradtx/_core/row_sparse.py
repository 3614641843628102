"""`RowSparse`: a gradient for some rows of a table (TF's `IndexedSlices`); `densify`, `random_row_sparse`."""

from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from gradtx._core import lowbit as _lowbit
from gradtx._core import placement as _placement
from gradtx._core import walk as _walk


@jax.tree_util.register_pytree_with_keys_class
class RowSparse:
    """A gradient that is zero except in the rows `indices` of a `dense_shape` table.

    Its pytree leaves are `indices` (int32, `[k]`) and `values` (`[k, *row_shape]`);
    `dense_shape` is static. Duplicate indices mean their values add up (TF sums them
    first, and so does every gradtx rule). After `deduplicated()` the indices are unique
    (sorted when rows repeated), padded to length k with `num_rows` (an out-of-range row
    whose values are 0).

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
    _gradtx_update_leaf = True
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
        """Unique indices, the values of duplicates summed (TF's `unique` + `unsorted_segment_sum`).

        The result keeps length k: missing entries are padded with index `num_rows` and
        zero values, so shapes stay static under jit. Costs O(k log k): one sort of the row
        keys tells whether any row repeats; only then are the duplicates summed (in the order
        of the entries, as TF) and the unique rows sorted to the front; otherwise the rows
        keep their order and only invalid ones become padding.
        """
        if self.unique:
            return self
        k = self.indices.shape[0]
        if k == 0:
            return RowSparse.tree_unflatten((self.dense_shape, True), (self.indices, self.values))
        uniq, values = _deduplicate(self._rows_or_oob(), self.values, self.num_rows)
        out = RowSparse.tree_unflatten((self.dense_shape, True), (uniq, values))
        return out.with_values(out.zero_padding(values))

    def todense(self) -> jax.Array:
        """The dense gradient (O(table): only for rules that have no sparse form)."""
        return (
            jnp.zeros(self.dense_shape, self.values.dtype)
            .at[self._rows_or_oob()]
            .add(self.values, mode="drop")
        )

    def gather(self, table: Any) -> jax.Array:
        """The rows `indices` of `table` (zeros for padding entries); a stored slot's values of those rows
        (`lowbit.Stored.rows`)."""
        if _lowbit.is_stored(table):
            return table.rows(self._rows_or_oob())
        return _placement.take_rows(table, self._rows_or_oob())

    def scatter(self, table: Any, rows: jax.Array) -> Any:
        """`table` with its rows `indices` set to `rows` (padding dropped; needs unique indices); a stored
        slot stores those rows only (`lowbit.Stored.with_rows`)."""
        if _lowbit.is_stored(table):
            return table.with_rows(self._rows_or_oob(), rows)
        return _placement.put_rows(table, self._rows_or_oob(), rows)  # (a NumPy table too: eager params)

    def add_to_rows(self, table: jax.Array, rows: jax.Array) -> jax.Array:
        """`table` with `rows` added to its rows `indices` (padding dropped, duplicates accumulate)."""
        return _placement.put_rows(table, self._rows_or_oob(), rows, add=True)

    def scatter_add_into(self, param: jax.Array) -> jax.Array:
        """`param` plus this update in its rows: what `apply_updates` does with a row-sparse update."""
        return self.add_to_rows(param, self.values)

    applied_to = scatter_add_into

    def zero_padding(self, rows: jax.Array) -> jax.Array:
        """`rows` (`[k, ...]`) with the entries of padding indices set to 0."""
        return jnp.where(_rows(self.valid(), rows), rows, jnp.zeros_like(rows))


@functools.partial(jax.jit, static_argnames="num_rows")
def _deduplicate(ids: jax.Array, values: jax.Array, num_rows: int) -> tuple[jax.Array, jax.Array]:
    """`(unique rows, summed values)` of entries whose invalid rows are `num_rows` (see `deduplicated`).

    Jitted on its own so that an eager step compiles it once per shape (its `cond` included).
    """
    k = ids.shape[0]
    position = lax.iota(jnp.int32, k)
    if (num_rows + 1) * k < 2**31:  # one int32 sort key: row * k + position (unique keys)
        key = lax.sort(ids * k + position, is_stable=False)
        sorted_ids, order = key // k, key % k
    else:
        sorted_ids, order = lax.sort((ids, position), num_keys=1)
    repeated = (sorted_ids[1:] == sorted_ids[:-1]) & (sorted_ids[1:] < num_rows)

    def summed(_):
        first = jnp.concatenate([jnp.ones((1,), bool), ~repeated])
        segment = jnp.cumsum(first.astype(jnp.int32)) - 1  # of each sorted entry
        uniq = jnp.full((k,), num_rows, jnp.int32).at[segment].set(sorted_ids)
        inverse = jnp.zeros((k,), jnp.int32).at[order].set(segment, unique_indices=True)
        return uniq, jax.ops.segment_sum(values, inverse, num_segments=k)  # in entry order, as TF

    def as_they_are(_):
        return ids, values

    return lax.cond(jnp.any(repeated), summed, as_they_are, None)


def _rows(mask: jax.Array, like: jax.Array) -> jax.Array:
    """A `[k]` mask broadcast against `[k, ...]` rows."""
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))


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
        lambda x: x.todense() if _walk.is_row_sparse(x) else x, tree, is_leaf=_walk.is_row_sparse
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
