r"""The linear assignment problem: `hungarian_algorithm` and `base_hungarian_algorithm`.

Given an :math:`n \times m` cost matrix :math:`C`, pick :math:`\min(n, m)` entries, at most
one per row and one per column, of least total cost:

.. math::
    \min_{X \in \{0, 1\}^{n \times m}} \sum_{ij} C_{ij} X_{ij} \quad \text{s.t.} \quad
    \sum_i X_{ij} \le 1,\ \sum_j X_{ij} \le 1,\ \sum_{ij} X_{ij} = \min(n, m).

Both functions are `optax.assignment`'s, with its signatures and its pairs, in its order and
dtypes (with ties too: each breaks them as optax's does). Both grow the matching one row
at a time along a shortest augmenting path (Dijkstra on reduced costs kept non-negative
by row and column potentials), so a step costs :math:`O(nm)` and the whole :math:`O(n^2 m)`;
both run under `jax.jit` and `jax.vmap`. A matrix with more rows than columns is solved
transposed. The entries must be finite.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["base_hungarian_algorithm", "hungarian_algorithm"]


def _matrix(fn: str, cost_matrix: Any) -> jax.Array:
    cost = jnp.asarray(cost_matrix)
    if cost.ndim != 2:
        raise ValueError(
            f"`{fn}`: `cost_matrix` must be a 2-D array (rows by columns), got shape {cost.shape}; "
            "map a batch of matrices with `jax.vmap`."
        )
    return cost


def _no_pairs() -> tuple[jax.Array, jax.Array]:
    return jnp.zeros(0, dtype=int), jnp.zeros(0, dtype=int)


# --------------------------------------------------------------------------- hungarian_algorithm


def _insert_row(cost: jax.Array, r: jax.Array, carry: tuple) -> tuple:
    """Match row `r` too: grow a shortest-path tree from it to a free column, then flip the path.

    Columns are `0..m-1`, plus a virtual root column `m` owned by `r`; `owner[c]` is the row
    matched to column `c` (-1: free), `u` and `v` the row and column potentials.
    """
    u, v, owner = carry
    m = cost.shape[1]
    owner = owner.at[m].set(r)

    def settle(s):
        u, v, used, seen, dist, via, col = s
        used = used.at[col].set(True)
        row = owner[col]
        seen = seen.at[row].set(True)
        open_ = ~used[:m]
        reduced = cost[row] - u[row] - v  # the edge's reduced cost, relative to the tree's frontier
        closer = open_ & (reduced < dist)
        via = jnp.where(closer, col, via)
        dist = jnp.where(closer, reduced, dist)
        gap = jnp.where(open_, dist, jnp.inf)
        nearest = jnp.argmin(gap)  # the first of equals
        delta = gap[nearest]
        u = jnp.where(seen, u + delta, u)
        v = jnp.where(used[:m], v - delta, v)
        dist = jnp.where(open_, dist - delta, dist)
        return u, v, used, seen, dist, via, nearest

    start = (
        u,
        v,
        jnp.zeros(m + 1, bool),
        jnp.zeros(u.shape[0], bool),
        jnp.full(m, jnp.inf, u.dtype),
        jnp.full(m, m, dtype=int),
        jnp.asarray(m),
    )
    u, v, _, _, _, via, col = lax.while_loop(lambda s: owner[s[-1]] >= 0, settle, start)

    def flip(s):  # shift each column's row one step back along the path; the root's row lands last
        owner, col = s
        back = via[col]
        return owner.at[col].set(owner[back]), back

    owner, _ = lax.while_loop(lambda s: s[1] != m, flip, (owner, col))
    return u, v, owner


def hungarian_algorithm(cost_matrix: Any) -> tuple[jax.Array, jax.Array]:
    r"""Solve the linear assignment problem for `cost_matrix`: the pairs `(i, j)` of least total cost.

    `optax.assignment.hungarian_algorithm`: the shortest-augmenting-path Hungarian method with
    potentials (e-maxx's formulation, as in Scenic), on the module's problem (above). The
    faster and simpler of the two; `base_hungarian_algorithm` is Crouse's. For continuous
    costs both return the one optimum; with ties each picks optax's.

    The pairs come in optax's order: for a square matrix by column (`j` is `0..n-1`); for a
    wide one (:math:`n < m`) by row, descending (`i` is `n-1..0`); for a tall one by column,
    descending.

    Args:
      cost_matrix: an :math:`n \times m` array of finite costs (float, int or bool).

    Returns:
      `(i, j)`: two integer arrays of length :math:`\min(n, m)`, the row and the column of
      each pair; the cost is `cost_matrix[i, j].sum()`.

    Raises:
      ValueError: if `cost_matrix` is not 2-D.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.assignment import hungarian_algorithm
        >>> cost = jnp.array([[8, 4, 7], [5, 2, 3], [9, 6, 7], [9, 4, 8]])
        >>> i, j = hungarian_algorithm(cost)
        >>> print(i, j, cost[i, j].sum())
        [1 3 0] [2 1 0] 15

    References:
      Kuhn, *The Hungarian method for the assignment problem*, Naval Research Logistics
      Quarterly, 1955. Dehghani et al., *Scenic: A JAX Library for Computer Vision Research
      and Beyond*, CVPR 2022 (arXiv:2110.11403).
    """
    cost = _matrix("hungarian_algorithm", cost_matrix)
    if 0 in cost.shape:
        return _no_pairs()
    tall = cost.shape[0] > cost.shape[1]
    if tall:
        cost = cost.T
    n, m = cost.shape
    carry = (jnp.zeros(n), jnp.zeros(m), jnp.full(m + 1, -1, dtype=int))
    _, _, owner = lax.fori_loop(0, n, lambda r, c: _insert_row(cost, r, c), carry)
    owner = owner[:m]
    if n == m:
        return owner, jnp.arange(m, dtype=int)
    col_of_row = (
        jnp.zeros(n, jnp.int32)
        .at[jnp.where(owner >= 0, owner, n)]
        .set(jnp.arange(m, dtype=jnp.int32), mode="drop")
    )
    rows, cols = jnp.arange(n - 1, -1, -1, dtype=int), col_of_row[::-1]
    return (cols, rows) if tall else (rows, cols)


# --------------------------------------------------------------------------- base_hungarian_algorithm


def _pick(spc: jax.Array, row4col: jax.Array, remaining: jax.Array, left: jax.Array) -> tuple:
    """The position in `remaining` of the open column to settle next, and its distance (Crouse's scan).

    Crouse scans the open columns in `remaining` order and takes a column of least distance,
    a later free one over an earlier equal one: the last free column among those of least
    distance, else the first of them.
    """
    m = remaining.shape[0]
    active = jnp.arange(m) < left
    dist = spc[remaining]
    lowest = jnp.min(jnp.where(active, dist, jnp.inf))
    tied = active & (dist == lowest)
    tied_free = tied & (row4col[remaining] == -1)
    last_free = m - 1 - jnp.argmax(tied_free[::-1])
    return jnp.where(tied_free.any(), last_free, jnp.argmax(tied)), lowest


def _augment(cost: jax.Array, cur: jax.Array, carry: tuple) -> tuple:
    """Match row `cur` too: settle columns by reduced distance up to a free one, then flip the path."""
    u, v, row4col, col4row = carry
    n, m = cost.shape

    def settle(s):
        i, min_value, remaining, left, sr, sc, spc, path, sink = s
        sr = sr.at[i].set(True)
        open_ = ~sc  # the columns in remaining[:left]
        r = min_value + cost[i] - u[i] - v
        path = jnp.where(open_ & (r < spc), i, path)
        spc = jnp.where(open_, jnp.minimum(spc, r), spc)
        index, min_value = _pick(spc, row4col, remaining, left)
        j = remaining[index]
        free = row4col[j] == -1
        sink = jnp.where(free, j, sink)
        i = jnp.where(free, i, row4col[j])
        left = left - 1
        remaining = remaining.at[index].set(remaining[left])
        return i, min_value, remaining, left, sr, sc.at[j].set(True), spc, path, sink

    start = (
        cur,
        jnp.zeros((), cost.dtype),
        jnp.arange(m)[::-1],
        jnp.asarray(m),
        jnp.zeros(n, bool),
        jnp.zeros(m, bool),
        jnp.full(m, jnp.inf, cost.dtype),
        jnp.full(m, -1),
        jnp.asarray(-1),
    )
    _, min_value, _, _, sr, sc, spc, path, sink = lax.while_loop(lambda s: s[-1] == -1, settle, start)

    u = u.at[cur].add(min_value)
    u = jnp.where(sr & (jnp.arange(n) != cur), u + min_value - spc[col4row], u)
    v = jnp.where(sc, v + spc - min_value, v)

    def flip(s):
        j, row4col, col4row, _ = s
        i = path[j]
        return col4row[i], row4col.at[j].set(i), col4row.at[i].set(j), i == cur

    _, row4col, col4row, _ = lax.while_loop(lambda s: ~s[-1], flip, (sink, row4col, col4row, False))
    return u, v, row4col, col4row


def base_hungarian_algorithm(cost_matrix: Any) -> tuple[jax.Array, jax.Array]:
    r"""Solve the linear assignment problem for `cost_matrix` with Crouse's algorithm (SciPy's).

    `optax.assignment.base_hungarian_algorithm`: the shortest augmenting path method of
    Crouse (2016), the one behind `scipy.optimize.linear_sum_assignment`, on the module's
    problem (above), in the default float dtype. `hungarian_algorithm` solves the same
    problem faster; for continuous costs the two return the same pairs, in different orders.

    The pairs come sorted by row: `i` ascending (`0..n-1` when :math:`n \le m`).

    Args:
      cost_matrix: an :math:`n \times m` array of finite costs (float, int or bool).

    Returns:
      `(i, j)`: two integer arrays of length :math:`\min(n, m)`, the row and the column of
      each pair; the cost is `cost_matrix[i, j].sum()`.

    Raises:
      ValueError: if `cost_matrix` is not 2-D.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.assignment import base_hungarian_algorithm
        >>> cost = jnp.array([[8, 4, 7], [5, 2, 3], [9, 6, 7], [9, 4, 8]])
        >>> i, j = base_hungarian_algorithm(cost)
        >>> print(i, j, cost[i, j].sum())
        [0 1 3] [0 2 1] 15

    References:
      Crouse, *On implementing 2D rectangular assignment algorithms*, IEEE Transactions on
      Aerospace and Electronic Systems 52(4), 2016.
    """
    cost = _matrix("base_hungarian_algorithm", cost_matrix)
    if 0 in cost.shape:
        return _no_pairs()
    tall = cost.shape[1] < cost.shape[0]
    if tall:
        cost = cost.T
    cost = cost.astype(float)
    n, m = cost.shape
    carry = (jnp.zeros(n, cost.dtype), jnp.zeros(m, cost.dtype), jnp.full(m, -1), jnp.full(n, -1))
    _, _, _, col4row = lax.fori_loop(0, n, lambda r, c: _augment(cost, r, c), carry)
    if tall:
        order = jnp.argsort(col4row)
        return col4row[order], order
    return jnp.arange(n), col4row
