"""How `update_rule` meets the leaves: slot fields one entry per leaf, the scalars cast once per dtype,
casts back to the slots' dtypes, the formula on touched rows, rules over all leaves together."""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import lowbit as _lowbit
from gradtx._core import matrix_work as _matrix_work
from gradtx._core import protocol as _protocol
from gradtx._core import scalars as _scalars
from gradtx._core import sliced as _sliced
from gradtx._core import sparse_rows as _sparse_rules
from gradtx._core import walk as _walk


class Slot(NamedTuple):
    """A slot shaped like its parameter: its fill value and dtype (see `update_rule`'s `slots`).

    Attributes:
      fill: the initial value: a number, or a hyperparameter (a schedule is read at count 0).
      dtype: the slot's dtype (e.g. `mu_dtype`); None: the parameter's; a low-bit format
        (`gradtx._core.lowbit.Format`): blockwise-quantized codes and scales.
      nonnegative: the slot never holds a negative value (a second moment, a sum of squares): in
        fewer bits it takes an unsigned map, twice as fine.
    """

    fill: Any = 0.0
    dtype: Any = None
    nonnegative: bool = False


SQUARES = Slot(0.0, nonnegative=True)
"""A slot of zeros that never goes negative: a sum or an average of squares (a second moment)."""


def first_step(h: Any, state: Any, extra_args: Any) -> dict[str, Any]:
    """A `prepare` giving the formula `h.first`, whether this is the first step (once per step, not per
    leaf)."""
    del state, extra_args
    return {"first": h.count == 0}


TREE_SCALARS: Mapping[str, Any] = types.MappingProxyType(
    {
        "over": "tree",
        "reads_params": True,
        "compute_dtype": _scalars.at_least_float32,
        "real_only": "its global scalars are of real vectors",
    }
)
"""The declaration of a rule whose scalars follow sums over the whole tree (Prodigy, D-Adaptation, DoG):
over all leaves together, reading the params, its scalars in float32 at least (float64 for float64
params), real numbers only."""


def is_none(x: Any) -> bool:
    return x is None


def unflatten(treedef: Any, leaves: list[Any]) -> Any:
    return treedef.unflatten(leaves)


def key_paths(updates: Any) -> list[Any]:
    return [k for k, _ in jax.tree_util.tree_flatten_with_path(updates, is_leaf=_walk.is_update_leaf)[0]]


def per_dtype(h: dict[str, Any], compute_dtype: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """`scalars_for(dtype)`: the scalars `h` cast for a leaf of `dtype` (`h.b1`, ...), once per dtype."""
    cache: dict[Any, Any] = {}

    def scalars_for(dtype):
        hd = cache.get(dtype)
        if hd is None:
            want = _scalars.real(dtype) if compute_dtype is None else compute_dtype(dtype)
            hd = cache[dtype] = types.SimpleNamespace(**{k: _scalars.cast(v, want) for k, v in h.items()})
        return hd

    scalars_for.h = h  # type: ignore[attr-defined]
    return scalars_for


def over_tree(leaf, leaves, flat_slots, flat_params, scalars_for, outs, new_slots) -> dict[str, Any]:
    """A rule over all leaves (`over="tree"`): the formula gets lists of the leaves that have a gradient, and
    may return, after the new slot lists, a dict of the state's new scalars (returned here). It may yield
    its matrix work, a list of `MatrixWork` (one per leaf), as a leaf's formula does."""
    idx = [i for i, g in enumerate(leaves) if g is not None]
    if not idx:
        return {}
    gs = [dense(leaves[i]) for i in idx]
    args = [[_lowbit.values(s[i]) for i in idx] for s in flat_slots]
    if flat_params is not None:
        args.append([flat_params[i] for i in idx])
    h = scalars_for(jnp.result_type(*(_walk.values_of(g) for g in gs)))
    res = _matrix_work.evaluate(leaf(gs, *args, h))
    for j, i in enumerate(idx):
        outs[i] = as_update(res[0][j], gs[j])
        for k in range(len(flat_slots)):
            new_slots[k][i] = keep(res[k + 1][j], flat_slots[k][i])
    return res[len(flat_slots) + 1] if len(res) > len(flat_slots) + 1 else {}


def flatten_up_to(fn: str, treedef: Any, updates: Any, tree: Any, field: str | None) -> list[Any]:
    try:
        return treedef.flatten_up_to(tree)
    except (ValueError, TypeError):
        raise _protocol.tree_mismatch_error(
            fn, "updates", updates, "params" if field is None else f"state.{field}", tree
        ) from None


def flat_slot(fn: str, treedef: Any, updates: Any, tree: Any, field: str, named: bool) -> list[Any]:
    """A slot field's leaves up to the updates; a `SlotDict` field (`{name: tree}`) as one dict per leaf."""
    if not named:
        return flatten_up_to(fn, treedef, updates, tree, field)
    per_name = {k: flatten_up_to(fn, treedef, updates, v, f"{field}[{k!r}]") for k, v in tree.items()}
    return [{k: per_name[k][i] for k in per_name} for i in range(treedef.num_leaves)]


def transposed(treedef: Any, per_leaf: list[Any]) -> dict[str, Any]:
    """One dict per leaf (`None` for a leaf without a parameter) as `{name: tree}` (a `SlotDict` field)."""
    names = sorted({k for d in per_leaf if d is not None for k in d})
    return {k: treedef.unflatten([None if d is None else d[k] for d in per_leaf]) for k in names}


def shape_of(g: Any) -> tuple[int, ...]:
    """A gradient leaf's shape (a row-sparse one's dense shape)."""
    return tuple(g.dense_shape) if _walk.is_row_sparse(g) else tuple(jnp.shape(g))


def check_slot(fn: str, g: Any, slot: Any, field: str, updates: Any, i: int, want: Any = None) -> None:
    """A slot must have the shape `init` gives it for this gradient's parameter (`want`; by default the
    gradient's own shape, any rank): refuse at trace time."""
    shape = shape_of(g)
    want = shape if want is None else tuple(want)
    s_shape = getattr(slot, "shape", None)
    if s_shape is not None and tuple(s_shape) != want:
        path = _walk.key_paths(updates)[i]
        made = "" if want == shape else f" (`init` makes it {want} for such a parameter)"
        raise ValueError(
            f"`{fn}`: the gradient at {path} has shape {shape}, but the state's slot `{field}` "
            f"there has shape {tuple(s_shape)}{made}; pass a state made by `init` from params shaped like "
            "these gradients."
        )


def slot_shape_for(spec: Callable[..., Any], g: Any, cache: dict[Any, Any], path: Any = None) -> Any:
    """The shape a slot made by the function `spec` of the parameter has for gradient leaf `g`'s
    parameter (traced abstractly, once per shape and dtype, and whole leaf's shape where `g` may be a
    slice of it: `path` given, for a rule with `paths=True`); None when `spec` gives no single array."""
    shape, dtype = shape_of(g), _walk.values_of(g).dtype
    whole = None if path is None else _sliced.leaf_shape(path, jax.ShapeDtypeStruct(shape, dtype))
    key = (id(spec), shape, dtype, whole)
    if key not in cache:
        made = spec if path is None else functools.partial(spec, path=path)
        out = jax.eval_shape(made, jax.ShapeDtypeStruct(shape, dtype))
        cache[key] = getattr(out, "shape", None)
    return cache[key]


def dtype_of(fn: str, g: Any, updates: Any, i: int) -> Any:
    """The dtype of gradient leaf `g` (the `i`-th of `updates`); a Python number (no dtype) is refused."""
    dtype = getattr(_walk.values_of(g), "dtype", None)
    if dtype is None:
        raise TypeError(
            f"`{fn}`: the gradient at {_walk.key_paths(updates)[i]} is {g!r} of type {type(g).__name__}, not "
            "an array; pass params and gradients as arrays (`jnp.asarray`)."
        )
    return dtype


def refuse_integers(
    fn: str, updates: Any, leaves: list[Any], treedef: Any, params: Any, flat_params: Any
) -> None:
    """Refuse (at trace time) an integer or boolean gradient, or a gradient for an integer parameter: the
    formula's update, stored in an integer dtype or added to an integer parameter, would be rounded (every
    step of a small learning rate to nothing) without a word."""
    if flat_params is None and params is not None:
        try:
            flat_params = treedef.flatten_up_to(params)
        except (ValueError, TypeError):  # another tree: the caller's shape check names it
            flat_params = None
    for i, g in enumerate(leaves):
        if g is None:
            continue
        p = None if flat_params is None else flat_params[i]
        what = (
            "gradient"
            if _walk.is_integer(g)
            else "parameter"
            if p is not None and _walk.is_integer(p)
            else None
        )
        if what is None:
            continue
        dtype = _walk.values_of(g if what == "gradient" else p).dtype
        raise TypeError(
            f"`{fn}`: the {what} at {_walk.key_paths(updates)[i]} is {dtype}, but this rule's "
            "updates are fractional and would be rounded away in an integer dtype (the parameter would never "
            "move); train floating-point parameters, or keep integer leaves out of the optimizer "
            "(`gradtx.partition` with `gradtx.set_to_zero()` for them, or `gradtx.freeze`)."
        )


def dense(g: Any) -> Any:
    return g.todense() if _walk.is_row_sparse(g) else g


def as_update(update: Any, g: Any) -> Any:
    """The update in the gradient's dtype (a row-sparse update's values in the values' dtype)."""
    if _walk.is_row_sparse(update):
        v = update.values
        want = _walk.values_of(g).dtype
        return update if v.dtype == want else update.with_values(v.astype(want))
    want = _walk.values_of(g).dtype
    return update if update.dtype == want else update.astype(want)


def keep(new: Any, old: Any) -> Any:
    """The new slot in the old slot's dtype(s), or its stored form (`lowbit.Stored`)."""
    if old is None or new is None:
        return new
    if _lowbit.is_stored(old):
        return new if _lowbit.is_stored(new) else old.replaced(new)  # (a row-sparse step stored its rows)
    if hasattr(old, "dtype"):
        return new if getattr(new, "dtype", None) == old.dtype else jnp.asarray(new).astype(old.dtype)
    return jax.tree.map(lambda n, o: n if n.dtype == o.dtype else n.astype(o.dtype), new, old)


def rows(leaf, g, slot_args, w, hd, kw):
    """The dense formula on the touched rows of a row-sparse gradient (TF's `SparseApply*`)."""
    present = [k for k, s in enumerate(slot_args) if s is not None]

    def rule(g_rows, *rows):
        full = [None] * len(slot_args)
        for k, r in zip(present, rows[: len(present)], strict=False):
            full[k] = r
        extra_p = rows[len(present) :]
        res = leaf(g_rows, *full, *extra_p, hd, **kw)
        return (res[0], *(res[k + 1] for k in present))

    out = _sparse_rules.apply_rows(rule, g, *(slot_args[k] for k in present), param=w[0] if w else None)
    new = [None] * len(slot_args)
    for k, r in zip(present, out[1:], strict=True):
        new[k] = r
    return (out[0], *new)
