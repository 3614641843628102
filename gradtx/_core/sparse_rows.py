"""Dense per-element rules applied to the touched rows only: `apply_rows`, `lift` (TF's `SparseApply*`)."""

from __future__ import annotations

from typing import Any, Callable

import jax

from gradtx._core import walk as _walk
from gradtx._core.row_sparse import RowSparse


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
        if _walk.is_row_sparse(grad):
            slots, param = (rest[:-1], rest[-1]) if with_param else (rest, None)
            return apply_rows(rule, grad, *slots, param=param)
        return rule(grad, *rest)

    return leaf


def decay_and_add(grad: Any, slot: jax.Array, decay: Any, rows: jax.Array) -> jax.Array:
    """`slot * decay` on every row, plus `rows` added to the rows `grad` touches (dense: `slot*decay + rows`).

    The sparse rule of TF1 Adam's moments, contrib's sign optimizers and RETURNN's own
    optimizers: untouched rows still decay. `rows` holds one entry per entry of a row-sparse
    `grad` (duplicates accumulate); for a dense `grad` it is shaped like `slot`.

    Args:
      grad: the gradient (`RowSparse` or dense) whose rows receive `rows`.
      slot: the slot table.
      decay: the factor every row of `slot` is multiplied by.
      rows: what is added, per entry of `grad`.

    Returns:
      The new slot table.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.sparse import RowSparse, decay_and_add
        >>> g = RowSparse(jnp.array([1]), jnp.array([[2.0]]), (3, 1))
        >>> decay_and_add(g, jnp.ones((3, 1)), 0.5, g.values)[:, 0]
        Array([0.5, 2.5, 0.5], dtype=float32)
    """
    decayed = slot * decay
    if _walk.is_row_sparse(grad):
        return grad.add_to_rows(decayed, rows)
    return decayed + rows
