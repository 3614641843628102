"""Shared machinery of `gradtx.parallel`: axis-name checks, `check_vma` detection, reductions.

Every collective of gradtx goes through this module. Conventions, relied on by all wrappers:

- An `axis_name` is one hashable name or a tuple of them (hierarchical: reduced over
  each in turn). It must be bound when `update` runs: inside `jax.shard_map` over a mesh
  with that axis, or `jax.pmap(..., axis_name=...)`; otherwise `bound_size` raises a
  `ValueError` that says how to call it (TF: "not within a tpu_shard_context").
- `jax.shard_map(..., check_vma=True)` types every value with the mesh axes it varies
  over. A gradient that does *not* vary over an axis there is the gradient of a replicated
  parameter, which autodiff has already combined over that axis (the transpose of the
  implicit broadcast is a `psum`): the *sum* of the replicas' gradients when each replica
  differentiated its own loss, their *mean* when the loss was averaged over the replicas
  (`pmean`) before differentiating. The two cannot be told apart, so the wrappers that
  reduce (`cross_shard`, `tower_reduce`, `sharded_state`) take `replicated_grads="sum"` or
  `"mean"` and refuse such a gradient without it (`check_replicated`), rather than guess.
  `vma_checked` detects the mode (`jax.lax.axis_index` is typed as varying only under
  `check_vma=True`); `varying_axes` reads a value's type. Under `check_vma=False` and
  under `jax.pmap` (which is `shard_map(check_vma=False)` in JAX 0.10) nothing is typed,
  and every gradient is taken as a per-replica one (a `pmean`-ed loss differentiates to
  each replica's own gradient there).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from typing import Any, Iterator

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import vma as _vma
from gradtx._core import walk as _walk

AxisName = Any
"""A mapped-axis name (hashable) or a tuple of names."""


# --------------------------------------------------------------------------- construction-time checks


def check_axis_name(fn: str, axis_name: Any) -> tuple[Hashable, ...]:
    """`axis_name` as a tuple of names; a name must be hashable and not None or a list.

    Raises:
      TypeError: for a list, None or an unhashable name.
      ValueError: for an empty tuple or a repeated name.
    """
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    if not names:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: `axis_name` must be a name or a non-empty tuple of names, got ()."
        )
    for n in names:
        if n is None or isinstance(n, (list, dict, set, bool)) or not isinstance(n, Hashable):
            raise TypeError(
                f"`{_checks.api_name(fn)}`: `axis_name` must be a hashable name (usually a str) or a "
                f"tuple of them, got {axis_name!r}."
            )
    if len(set(names)) != len(names):
        raise ValueError(f"`{_checks.api_name(fn)}`: `axis_name` repeats a name: {axis_name!r}.")
    return tuple(names)


# --------------------------------------------------------------------------- trace-time checks


def _show(axes: tuple[Hashable, ...]) -> str:
    return repr(axes[0]) if len(axes) == 1 else repr(axes)


REPLICATED_GRADS = ("sum", "mean")
"""What a gradient that autodiff already combined over the replicas holds (`replicated_grads`)."""


def check_replicated_grads(fn: str, value: Any) -> None:
    """`replicated_grads` is None, "sum" or "mean"."""
    if value is not None:
        _checks.check_one_of(fn, "replicated_grads", value, REPLICATED_GRADS)


def is_bound(axes: tuple[Hashable, ...]) -> bool:
    """True when every axis of `axes` is bound here (inside `shard_map` / `pmap` over it)."""
    try:
        for a in axes:
            jax.lax.axis_size(a)
    except NameError:
        return False
    return True


def bound_size(fn: str, axes: tuple[Hashable, ...]) -> int:
    """The number of replicas over `axes` (the product of their sizes).

    Raises:
      ValueError: if an axis is not bound (called outside `shard_map`/`pmap`).
    """
    sizes = []
    for a in axes:
        try:
            sizes.append(int(jax.lax.axis_size(a)))
        except NameError:
            raise ValueError(
                f"`{fn}`: the axis name {a!r} is not bound here, so there is nothing to reduce over. "
                f"Call `update` inside the mapped function: `jax.shard_map(step, mesh=mesh, ...)` with a "
                f"mesh axis named {a!r} (e.g. `jax.make_mesh((n,), ({a!r},))`), or "
                f"`jax.pmap(step, axis_name={a!r})` (TF's error: not within a tpu_shard_context)."
            ) from None
    return math.prod(sizes)


def vma_checked(axes: tuple[Hashable, ...]) -> bool:
    """True inside `jax.shard_map(..., check_vma=True)`: values are typed with the axes they vary over."""
    return any(a in varying(jax.lax.axis_index(a)) for a in axes)


varying = _vma.varying


def varying_axes(x: Any, axes: tuple[Hashable, ...], checked: bool) -> tuple[Hashable, ...]:
    """The axes of `axes` over which `x` still holds per-replica values (all of them when untyped)."""
    if not checked:
        return axes
    if _walk.is_row_sparse(x):
        v = varying(x.indices) | varying(x.values)
    else:
        v = varying(x)
    return tuple(a for a in axes if a in v)


def _combined_leaves(tree: Any, axes: tuple[Hashable, ...]) -> Iterator[tuple[str, tuple[Hashable, ...]]]:
    """The key path of each leaf of `tree` that does not vary over some of `axes`, and those axes."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree, is_leaf=_walk.is_row_sparse)[0]:
        missing = () if leaf is None else tuple(a for a in axes if a not in varying_axes(leaf, axes, True))
        if missing:
            yield jax.tree_util.keystr(path) or "<root>", missing


def require_per_replica(
    fn: str, tree: Any, axes: tuple[Hashable, ...], checked: bool, what: str = "gradient"
) -> None:
    """Refuse leaves of `tree` that autodiff has already summed over `axes` (`check_vma=True` only).

    Rules that treat replicas differently (drop some, step locally) need each replica's
    own gradient; a replicated parameter's gradient under `check_vma=True` is the sum.

    Raises:
      ValueError: naming the first such leaf and the fix.
    """
    if not checked:
        return
    for where, missing in _combined_leaves(tree, axes):
        raise ValueError(
            f"`{fn}`: needs each replica's own {what}, but the {what} at "
            f"{where} does not vary over {_show(missing)}: under "
            f"`jax.shard_map(..., check_vma=True)` the gradient of a replicated parameter comes out "
            f"already summed over the axis. Differentiate with respect to per-replica parameters "
            f"instead, e.g. `jax.grad(loss)(jax.lax.pcast(params, {_show(axes)}, to='varying'), batch)`, "
            f"or use `check_vma=False`."
        )


def check_replicated(
    fn: str, tree: Any, axes: tuple[Hashable, ...], checked: bool, replicated_grads: str | None
) -> None:
    """Refuse a gradient autodiff already combined over `axes` when the caller did not say how.

    Under `check_vma=True` the gradient of a replicated parameter arrives summed over the
    replicas (per-replica losses) or averaged (a `pmean`-ed loss): the same type either
    way. Reducing it as if it were a sum when it is a mean gives 1/N of the step, silently.

    Raises:
      ValueError: naming the first such leaf, the two cases and the fixes.
    """
    if not checked or replicated_grads is not None:
        return
    for where, missing in _combined_leaves(tree, axes):
        raise ValueError(
            f"`{fn}`: the gradient at {where} does not vary over "
            f"{_show(missing)}: under `jax.shard_map(..., check_vma=True)` autodiff has already "
            f"combined the replicas' gradients of this replicated parameter -- their sum if each "
            f"replica differentiated its own loss, their mean if the loss was averaged over the "
            f"replicas (`jax.lax.pmean`) first -- and the two look the same. Say which with "
            f"`replicated_grads='sum'` or `replicated_grads='mean'`, or differentiate with respect to "
            f"`gradtx.parallel.per_replica(params, {_show(axes)})`, which gives each replica its own "
            f"gradient in every mode (and lets `sharded_state` reduce-scatter it)."
        )


def combined_factor(g: Any, axes: tuple[Hashable, ...], checked: bool, replicated_grads: str | None) -> int:
    """What turns `g`, already combined by autodiff over some of `axes`, into the sum over them.

    1 for a per-replica gradient or one declared a sum; the product of the sizes of the
    axes `g` does not vary over for one declared a mean.
    """
    if not checked or replicated_grads != "mean":
        return 1
    done = [a for a in axes if a not in varying_axes(g, axes, True)]
    return math.prod(int(jax.lax.axis_size(a)) for a in done)


# --------------------------------------------------------------------------- collectives


def match_type(x: Any, like: Any) -> Any:
    """`x` cast to `like`'s dtypes and to vary over every axis `like` varies over (equal types for
    `lax.cond` branches: the communicating branch of an f16 gradient may compute in f32)."""

    def cast(a, b):
        if a is None:
            return None
        if hasattr(a, "dtype") and hasattr(b, "dtype") and a.dtype != b.dtype:
            a = a.astype(b.dtype)
        return _vma.typed_like(a, b)

    return jax.tree.map(cast, x, like, is_leaf=lambda v: v is None)


def psum(x: jax.Array, axes: tuple[Hashable, ...], *, hierarchical: bool = False) -> jax.Array:
    """Sum over `axes` (one axis after the other when `hierarchical`); identity for no axes."""
    if not axes:
        return x
    if hierarchical:
        for a in axes:
            x = jax.lax.psum(x, a)
        return x
    return jax.lax.psum(x, axes)


def all_gather(x: jax.Array, axes: tuple[Hashable, ...], checked: bool) -> jax.Array:
    """Concatenate each replica's `x` along axis 0 (in replica order); the result is replicated."""
    if not axes:
        return x
    if checked:
        return jax.lax.all_gather(x, axes, tiled=True, to="invarying")
    return jax.lax.all_gather(x, axes, tiled=True)


def _group_sum_gathered(x: jax.Array, axis: Hashable, groups: Sequence[Sequence[int]]) -> jax.Array:
    """Sum of `x` over this replica's group, from an all-gather (psum with groups is not
    implemented under `check_vma=True`): O(axis size) memory."""
    n = sum(len(g) for g in groups)
    gathered = jax.lax.all_gather(x, axis)  # [n, ...], varying
    members = jnp.asarray(groups, jnp.int32)  # [num_groups, group_size]
    group_of = (
        jnp.zeros((n,), jnp.int32)
        .at[members.reshape(-1)]
        .set(jnp.repeat(jnp.arange(len(groups), dtype=jnp.int32), len(groups[0])))
    )
    mine = members[group_of[jax.lax.axis_index(axis)]]
    return jnp.sum(gathered[mine], axis=0)


def reduce_leaf(
    fn: str,
    g: Any,
    axes: tuple[Hashable, ...],
    reduction: str,
    size: int,
    checked: bool,
    *,
    groups: Sequence[Sequence[int]] | None = None,
    hierarchical: bool = False,
    replicated_grads: str | None = None,
) -> Any:
    """One gradient leaf summed (or averaged) over the replicas.

    Axes over which the leaf is already replicated under `check_vma=True` count as
    combined, as `replicated_grads` says (`check_replicated` has refused them without it).
    A `RowSparse` leaf is all-gathered (indices and values, O(k * replicas)), so it stays
    row-sparse; its duplicate rows add up as the dense sum would.
    """
    todo = varying_axes(g, axes, checked)
    factor = combined_factor(g, axes, checked, replicated_grads)
    if factor != 1:  # the mean over the axes autodiff combined: back to their sum
        g = _walk.with_values(g, _walk.values_of(g) * jnp.asarray(factor, _walk.values_of(g).dtype))
    if groups is not None:
        n = len(groups[0])
        if checked and not todo:
            raise ValueError(
                f"`{fn}`: with `axis_index_groups`, the gradient must vary over {_show(axes)}; under "
                f"`check_vma=True` a replicated parameter's gradient is already summed over the whole axis, "
                f"so the sums within groups cannot be recovered. Use `check_vma=False` or per-replica "
                f"parameters."
            )
        if _walk.is_row_sparse(g):
            g = g.todense()
        if checked:
            out = _group_sum_gathered(g, axes[0], groups)
        else:
            out = jax.lax.psum(g, axes[0], axis_index_groups=[list(m) for m in groups])
        return out / jnp.asarray(n, out.dtype) if reduction == "mean" else out
    if _walk.is_row_sparse(g):
        from gradtx.sparse import RowSparse

        idx, vals = g.indices, g.values
        if todo:
            # Padding indices stay out of range after gathering: same rows, same sums.
            idx, vals = all_gather(idx, todo, checked), all_gather(vals, todo, checked)
        if reduction == "mean":
            vals = vals / jnp.asarray(size, vals.dtype)
        return RowSparse.tree_unflatten((g.dense_shape, False), (idx, vals))
    out = psum(g, todo, hierarchical=hierarchical)
    return out / jnp.asarray(size, out.dtype) if reduction == "mean" else out


def check_groups(fn: str, groups: Any, axes: tuple[Hashable, ...]) -> tuple[tuple[int, ...], ...] | None:
    """Validate `axis_index_groups` at construction: equal-sized disjoint groups of replica indices."""
    if groups is None:
        return None
    name = _checks.api_name(fn)
    if len(axes) != 1:
        raise ValueError(f"`{name}`: `axis_index_groups` needs a single axis name, got `axis_name`={axes!r}.")

    def index(i):
        return None if isinstance(i, bool) else operator.index(i)

    try:
        out = tuple(tuple(index(i) for i in g) for g in groups)
    except TypeError:
        out = None
    if not out or any(None in g for g in out) or any(not g for g in out):
        raise TypeError(
            f"`{name}`: `axis_index_groups` must be a list of non-empty lists of replica "
            f"indices, got {groups!r}."
        )
    flat = [i for g in out for i in g]
    if len({len(g) for g in out}) != 1 or sorted(flat) != list(range(len(flat))):
        raise ValueError(
            f"`{name}`: `axis_index_groups` must be equal-sized groups that split the replicas "
            f"0..n-1 exactly once, got {groups!r}."
        )
    return out


def check_groups_cover(fn: str, groups: tuple[tuple[int, ...], ...] | None, size: int) -> None:
    """At trace time: the groups must cover exactly the `size` replicas of the axis."""
    if groups is not None and sum(len(g) for g in groups) != size:
        covered = sum(len(g) for g in groups)
        raise ValueError(f"`{fn}`: `axis_index_groups` covers {covered} replicas, but the axis has {size}.")
