"""Row-sparse gradients (TF's `IndexedSlices`) and the helpers that produce and apply them.

A `RowSparse` is the gradient of an embedding table that a batch touched in only some
rows. Transforms apply TF's sparse rule to it (most change the touched rows only, see
each optimizer), `apply_updates` scatters it, and under `jax.jit` with donated params and
state one step costs O(touched rows), not O(table).

Indices must lie in `[0, num_rows)`; under jit they cannot be checked, and rows outside
are dropped (TF raises instead).
"""

from gradtx._core.row_sparse import RowSparse, densify, random_row_sparse
from gradtx._core.sparse_rows import apply_rows, decay_and_add, lift
from gradtx.sparse._autodiff import value_and_grad

__all__ = [
    "RowSparse",
    "apply_rows",
    "decay_and_add",
    "densify",
    "lift",
    "random_row_sparse",
    "value_and_grad",
]
