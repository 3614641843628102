"""`value_and_grad`: gradients of embedding tables as `RowSparse`, from the rows a loss looks up."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import masks as _masks
from gradtx._core import placement as _placement
from gradtx._core.row_sparse import RowSparse


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
        leaves = {_masks.path_str(p): (p, x) for p, x in jax.tree_util.tree_flatten_with_path(params)[0]}
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
                    _placement.take_rows(x, rows_of[_masks.path_str(kp)][0])
                    if _masks.path_str(kp) in rows_of
                    else x
                ),
                p,
            )

        small = substituted(params)
        out, grads = jax.value_and_grad(loss_fn, has_aux=has_aux)(small, *args)

        def to_sparse(kp, g):
            name = _masks.path_str(kp)
            if name not in rows_of:
                return g
            idx, n = rows_of[name]
            shape = (n,) + g.shape[1:]
            return RowSparse.tree_unflatten((shape, True), (idx, g))

        return out, jax.tree_util.tree_map_with_path(to_sparse, grads)

    return wrapped
