"""`update_rule`: the one constructor of gradtx's building blocks.

An algorithm is its leaf formula plus a declaration; `update_rule` owns the rest, once:
the step count, resolving hyperparameters under one dtype policy, `None` and row-sparse
leaves, slots (created placed like their parameters, cast back to their dtypes), the
transform's kind and its state type. Every `scale_by_*` in `gradtx.transforms` is built
with it; "Adding an optimizer" in docs/guides shows a new rule end to end.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Literal, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _checks, _placement, _protocol, _tree, _vma, packing
from gradtx.sparse import _rules as _sparse_rules


class Slot(NamedTuple):
    """A slot shaped like its parameter: its fill value and dtype (see `update_rule`'s `slots`).

    Attributes:
      fill: the initial value: a number, or a hyperparameter (a schedule is read at count 0).
      dtype: the slot's dtype (e.g. `mu_dtype`); None: the parameter's.
    """

    fill: Any = 0.0
    dtype: Any = None


_NO_STATE = _protocol.EmptyState()


def _is_python_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _static_number(x: Any) -> bool:
    return _is_python_number(x) or (isinstance(x, (jax.Array,)) and not isinstance(x, jax.core.Tracer))


def _cast(x: Any, dtype: Any) -> Any:
    """`x` (a resolved scalar) for a leaf of `dtype`: Python numbers as they are, arrays cast once."""
    if _is_python_number(x) or x is None or isinstance(x, bool):
        return x
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return x  # ints (a step), bools (flags): as they are
    return x if x.dtype == dtype else x.astype(dtype)


def update_rule(
    name: str,
    state: type,
    leaf: Callable[..., tuple[Any, ...]],
    *,
    hyper: Mapping[str, Any] | None = None,
    slots: Mapping[str, Any] | None = None,
    scalars: Mapping[str, Callable[[Any], Any]] | None = None,
    prepare: Callable[..., Mapping[str, Any]] | None = None,
    sparse: Literal["densify", "rows"] | Callable[..., tuple[Any, ...]] = "densify",
    reads_params: bool = False,
    kind: type = _protocol.ElementWise,
    count: Literal["always", "if_scheduled"] = "always",
    tf_scalars: bool = False,
    extra: Mapping[str, Any] | None = None,
    over: Literal["leaf", "tree"] = "leaf",
    paths: bool = False,
    real_only: str | None = None,
) -> _protocol.GradientTransformation:
    r"""A transform from an algorithm's leaf formula and its declaration.

    The formula is written for one parameter: `leaf(g, *slots, [w], h) -> (update, *new_slots)`,
    with `g` the gradient, the slots in the order `slots` declares them (`None` for a slot
    declared `None`), the parameter `w` when `reads_params`, and `h` the step's scalars
    (`h.b1`, ..., `h.count` (completed updates), `h.t` (this step, 1-based), what `prepare`
    returns and the declared `extra` arguments). It returns the update (the step to add,
    before any learning rate that follows it in a chain) and the new slots.

    The constructor owns the rest:

    - **the count**: `state.count`, incremented (saturating) each step; schedules are called
      with it (step t sees `count = t - 1`, TF's global step before its increment).
    - **hyperparameters, under one dtype policy**: each of `hyper` is resolved once per
      step (a schedule is called, a number or array is taken as is). A hyperparameter given
      as a Python number stays a Python number: `prepare` and the formula combine such
      numbers in double precision and they meet an array only where they are used, taking
      its dtype (optax's arithmetic, e.g. RAdam's :math:`\rho_\infty = 2/(1-\beta_2) - 1`).
      An array (a jax scalar, a schedule's value, an injected hyperparameter) and what
      `prepare` computes are cast once to each leaf's dtype (the gradient's) before the
      formula sees them. `tf_scalars=True` declares TF's arithmetic instead: every
      hyperparameter first becomes a scalar of the variables' float dtype (float32 for
      float32 params, float64 for float64; TF's `_prepare`), so `1 - beta` and `prepare`
      compute in float32 as TF's kernels do; the TF parity tests prove each such rule.
    - **`None` leaves**: the update is `None` and the slots are kept (a variable without a
      gradient, or masked out).
    - **row-sparse leaves** (`gradtx.sparse.RowSparse`): `sparse="densify"` densifies them;
      `"rows"` applies the formula to the touched rows only (TF's `SparseApply*`: the rows
      of each slot and of `w` are gathered, the new rows scattered back, the update is
      row-sparse); a function takes the `RowSparse` gradient and the whole slots itself.
    - **slots**: `slots` maps each slot field of `state` to its initial value: a number
      or a `Slot(fill, dtype)` gives an array shaped like the parameter, `None` no slot, a
      function of one parameter any other array or pytree (made with `gradtx._placement`);
      a field annotated `SlotDict` holds `{name: tree}` and its function gives one dict per
      parameter (the formula sees and returns that dict).
      Every slot is created placed like its parameter in each mode (eager, `jit` with Auto
      or Explicit axes, `shard_map`, `jax.ShapeDtypeStruct`); after each step it is cast
      back to its dtype (a bf16 slot updated with an f32 gradient stays bf16); a slot shaped
      like its parameter is checked against the gradient's shape at trace time.
    - **scalars**: `scalars` maps each non-slot field of `state` (TF's `beta1_power`) to a
      function of the hyperparameters at count 0 giving its initial value (in the scalar
      dtype of the params); `prepare(h, state, extra_args)` returns the new values under the
      same names (and anything else the formula needs), once per step.
    - **the kind**: `kind` is `ElementWise` (the formula treats elements alike; runs on
      packed parameters as they are) or `LeafWise` (it needs whole leaves: a norm, a shape;
      on packed parameters it runs on per-leaf views, `gradtx.packing.leaf_wise`).
    - **the state**: `state(count, *slots, *scalars)`; with `count="if_scheduled"` and no
      schedule among the hyperparameters, `EmptyState()`.

    `over="tree"` is for rules that combine all leaves (GGT's Gram matrix): the formula then
    takes lists, `leaf(gs, *slot_lists, [ws], h) -> (updates, *new_slot_lists)`, of the
    leaves that have a gradient. `paths=True` gives the formula the leaf's key path (`path=`,
    a `jax.tree_util` key path); `real_only` (a reason) refuses complex gradients and
    parameters at trace time. `extra` names the extra arguments of `update` that the formula
    reads, with defaults.

    Args:
      name: the building block's public name (errors name the function the user called).
      state: the state's NamedTuple class.
      leaf: the formula, as above.
      hyper: `{name: value}`: the hyperparameters (numbers, scalar arrays or schedules).
      slots: `{field: initial value}`, as above.
      scalars: `{field: function of h giving the initial value}`, as above.
      prepare: `prepare(h, state, extra_args) -> {name: value}`, once per step.
      sparse: `"densify"`, `"rows"` or a sparse formula, as above.
      reads_params: the formula reads the parameter (`update` then needs `params`).
      kind: `gradtx.ElementWise` or `gradtx.LeafWise`.
      count: `"always"`, or `"if_scheduled"` for a stateless rule with schedules.
      tf_scalars: TF's float32 scalar arithmetic, as above.
      extra: `{name: default}` of extra arguments the formula reads.
      over: `"leaf"`, or `"tree"` for a rule over all leaves together.
      paths: give the formula the leaf's key path.
      real_only: refuse complex numbers, saying why.

    Returns:
      A transform of kind `kind`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> class State(NamedTuple):  # doctest: +SKIP
        ...     count: jax.Array
        ...     m: gradtx.Updates
        >>> def _leaf(g, m, h):
        ...     m = h.b * m + g
        ...     return m, m
        >>> tx = gradtx.update_rule("heavy_ball", gradtx.TraceState, lambda g, m, h: _leaf(g, m, h),
        ...                         hyper={"b": 0.5}, slots={"momentum": 0.0})
        >>> s = tx.init(jnp.zeros(2))
        >>> _, s = tx.update(jnp.ones(2), s)
        >>> tx.update(jnp.ones(2), s)[0]
        Array([1.5, 1.5], dtype=float32)
    """
    display = _checks.api_name(name)
    hyper = dict(hyper or {})
    slot_specs = dict(slots or {})
    scalar_inits = dict(scalars or {})
    extra = dict(extra or {})
    fields = state._fields
    has_count = count == "always" or _tree.any_schedule(*hyper.values())
    undeclared = [f for f in fields if f != "count" and f not in slot_specs and f not in scalar_inits]
    if undeclared or (has_count and "count" not in fields):
        raise TypeError(
            f"`update_rule` ({name}): the fields {undeclared} of {state.__name__} are not declared."
        )
    slot_names = [f for f in fields if f in slot_specs]
    live = [f for f in slot_names if slot_specs[f] is not None]
    like_param = {f for f in live if _is_python_number(slot_specs[f]) or isinstance(slot_specs[f], Slot)}
    scalar_names = [f for f in fields if f in scalar_inits]
    dict_fields = {f for f in live if _protocol.mark_of(state, f) is _protocol.SLOT_DICT}
    static = {k: float(v) if _is_python_number(v) and not isinstance(v, int) else v for k, v in hyper.items()}
    schedules = {k: v for k, v in hyper.items() if _checks.is_schedule(v)}

    def resolve(count_: Any, dtype: Any) -> dict[str, Any]:
        h = dict(static)
        for k, v in schedules.items():
            h[k] = v(count_)
        if tf_scalars:
            h = {k: jnp.asarray(v, dtype) for k, v in h.items()}
        return h

    # ------------------------------------------------------------------ init

    def init_slot(spec: Any, p: Any) -> Any:
        if isinstance(spec, Slot):
            return _placement.filled(p, _tree.resolve(spec.fill, _tree.zero_count()), spec.dtype)
        if _is_python_number(spec):
            return _placement.filled(p, spec)
        return spec(p)

    def init_fn(params):
        if not has_count:
            return _NO_STATE
        zero = _tree.zero_count()
        values: dict[str, Any] = {"count": zero}
        param_leaves, treedef = jax.tree.flatten(params, is_leaf=_is_none)
        if scalar_inits:
            h0 = types.SimpleNamespace(**resolve(zero, _scalar_dtype(jax.tree.leaves(params))))
            for f in scalar_names:
                values[f] = jnp.asarray(scalar_inits[f](h0), _scalar_dtype(jax.tree.leaves(params)))
        for f in slot_names:
            spec = slot_specs[f]
            if spec is None:
                values[f] = None
                continue
            per_param = [None if p is None else init_slot(spec, p) for p in param_leaves]
            values[f] = _transposed(treedef, per_param) if f in dict_fields else treedef.unflatten(per_param)
        return state(**values)

    # ------------------------------------------------------------------ update

    def update_fn(updates, state_, params=None, **extra_args):
        if reads_params and params is None:
            raise _protocol.missing_params(display)
        leaves, treedef = jax.tree.flatten(updates, is_leaf=_tree._is_update_leaf)
        count_ = state_.count if has_count else None
        flat_slots = [
            _flat_slot(display, treedef, updates, getattr(state_, f), f, f in dict_fields)
            if f in live
            else [None] * len(leaves)
            for f in slot_names
        ]
        flat_params = _flatten_up_to(display, treedef, updates, params, None) if reads_params else None
        if real_only is not None:
            _refuse_complex(display, leaves, flat_params, real_only)
        sdtype = (
            state_[fields.index(scalar_names[0])].dtype
            if scalar_names
            else _scalar_dtype(leaves if flat_params is None else flat_params)
        )
        h = resolve(count_, sdtype)
        t = _tree.increment(count_) if has_count else None
        h["count"], h["t"] = count_, t
        for k, default in extra.items():
            h[k] = extra_args.get(k, default)
        if prepare is not None:
            h.update(prepare(types.SimpleNamespace(**h), state_, extra_args))
        by_dtype: dict[Any, Any] = {}

        def scalars_for(dtype):
            hd = by_dtype.get(dtype)
            if hd is None:
                hd = by_dtype[dtype] = types.SimpleNamespace(**{k: _cast(v, dtype) for k, v in h.items()})
            return hd

        n_slots = len(slot_names)
        checked = [k for k, f in enumerate(slot_names) if f in like_param]
        outs: list[Any] = list(leaves)
        new_slots = [list(s) for s in flat_slots]
        if over == "tree":
            idx = [i for i, g in enumerate(leaves) if g is not None]
            if idx:
                gs = [_dense(leaves[i]) for i in idx]
                args = [[s[i] for i in idx] for s in flat_slots]
                if flat_params is not None:
                    args.append([flat_params[i] for i in idx])
                res = leaf(gs, *args, scalars_for(_tree.values_of(gs[0]).dtype))
                for j, i in enumerate(idx):
                    outs[i] = _as(res[0][j], gs[j])
                    for k in range(n_slots):
                        new_slots[k][i] = _keep(res[k + 1][j], flat_slots[k][i])
        else:
            path_list = (
                [
                    k
                    for k, _ in jax.tree_util.tree_flatten_with_path(updates, is_leaf=_tree._is_update_leaf)[
                        0
                    ]
                ]
                if paths
                else None
            )
            dense_leaf = leaf
            for i, g in enumerate(leaves):
                if g is None:
                    continue
                slot_args = [s[i] for s in flat_slots]
                for k in checked:
                    _check_slot(display, g, slot_args[k], slot_names[k], updates, i)
                p = flat_params[i] if flat_params is not None else None
                hd = scalars_for(_tree.values_of(g).dtype)
                kw = {"path": path_list[i]} if paths else {}
                if _tree.is_row_sparse(g) and sparse != "densify":
                    if sparse == "rows":
                        res = _rows(dense_leaf, g, slot_args, p, hd, kw, reads_params)
                    else:
                        res = sparse(g, *slot_args, *((p,) if reads_params else ()), hd, **kw)
                else:
                    if _tree.is_row_sparse(g):
                        g = g.todense()
                    res = dense_leaf(g, *slot_args, *((p,) if reads_params else ()), hd, **kw)
                outs[i] = _as(res[0], g)
                for k in range(n_slots):
                    new_slots[k][i] = _keep(res[k + 1], slot_args[k])
        if not has_count:
            return treedef.unflatten(outs), state_
        values = {"count": t}
        for k, f in enumerate(slot_names):
            values[f] = (
                None
                if f not in live
                else _transposed(treedef, new_slots[k])
                if f in dict_fields
                else treedef.unflatten(new_slots[k])
            )
        for f in scalar_names:
            old = getattr(state_, f)
            values[f] = _vma.typed_like(jnp.asarray(h[f]).astype(old.dtype), old)
        return treedef.unflatten(outs), state(**values)

    if kind is _protocol.ElementWise:
        return _protocol.ElementWise(init_fn, update_fn)
    return packing.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))  # per-leaf views of packed


# --------------------------------------------------------------------------- helpers


def _is_none(x: Any) -> bool:
    return x is None


def _scalar_dtype(leaves: Any) -> Any:
    """float64 when a leaf is float64 (x64), else float32: TF's scalars follow the variables' dtype."""
    for x in leaves:
        if x is not None and getattr(_tree.values_of(x), "dtype", None) == jnp.float64:
            return jax.dtypes.canonicalize_dtype(jnp.float64)
    return jnp.dtype(jnp.float32)


def _flatten_up_to(fn: str, treedef: Any, updates: Any, tree: Any, field: str | None) -> list[Any]:
    try:
        return treedef.flatten_up_to(tree)
    except (ValueError, TypeError):
        raise _protocol.tree_mismatch_error(
            fn, "updates", updates, "params" if field is None else f"state.{field}", tree
        ) from None


def _flat_slot(fn: str, treedef: Any, updates: Any, tree: Any, field: str, named: bool) -> list[Any]:
    """A slot field's leaves up to the updates; a `SlotDict` field (`{name: tree}`) as one dict per leaf."""
    if not named:
        return _flatten_up_to(fn, treedef, updates, tree, field)
    per_name = {k: _flatten_up_to(fn, treedef, updates, v, f"{field}[{k!r}]") for k, v in tree.items()}
    return [{k: per_name[k][i] for k in per_name} for i in range(treedef.num_leaves)]


def _transposed(treedef: Any, per_leaf: list[Any]) -> dict[str, Any]:
    """One dict per leaf (`None` for a leaf without a parameter) as `{name: tree}` (a `SlotDict` field)."""
    names = sorted({k for d in per_leaf if d is not None for k in d})
    return {k: treedef.unflatten([None if d is None else d[k] for d in per_leaf]) for k in names}


def _check_slot(fn: str, g: Any, slot: Any, field: str, updates: Any, i: int) -> None:
    """A slot shaped like its parameter must have the gradient's shape (any rank): refuse at trace time."""
    shape = tuple(g.dense_shape) if _tree.is_row_sparse(g) else jnp.shape(g)
    s_shape = getattr(slot, "shape", None)
    if s_shape is not None and tuple(s_shape) != tuple(shape):
        path = _tree.key_paths(updates)[i]
        raise ValueError(
            f"`{fn}`: the gradient at {path} has shape {tuple(shape)}, but the state's slot `{field}` "
            f"there has shape {tuple(s_shape)}; pass a state made by `init` from params shaped like these "
            "gradients."
        )


def _refuse_complex(fn: str, leaves: list[Any], params: list[Any] | None, why: str) -> None:
    for what, flat in (("gradient", leaves), ("parameter", params or [])):
        for i, x in enumerate(flat):
            if x is not None and jnp.iscomplexobj(_tree.values_of(x)):
                raise TypeError(
                    f"`{fn}`: the {what} at leaf {i} is complex ({jnp.result_type(_tree.values_of(x))}), "
                    f"which this rule does not support: {why}. The rules of sgd, momentum, adam (and its "
                    "variants), rmsprop, adagrad, adadelta, ftrl and lamb do, with second moments of |g|**2."
                )


def _dense(g: Any) -> Any:
    return g.todense() if _tree.is_row_sparse(g) else g


def _as(update: Any, g: Any) -> Any:
    """The update in the gradient's dtype (a row-sparse update's values in the values' dtype)."""
    if _tree.is_row_sparse(update):
        v = update.values
        want = _tree.values_of(g).dtype
        return update if v.dtype == want else update.with_values(v.astype(want))
    want = _tree.values_of(g).dtype
    return update if update.dtype == want else update.astype(want)


def _keep(new: Any, old: Any) -> Any:
    """The new slot in the old slot's dtype(s)."""
    if old is None or new is None:
        return new
    if hasattr(old, "dtype"):
        return new if getattr(new, "dtype", None) == old.dtype else jnp.asarray(new).astype(old.dtype)
    return jax.tree.map(lambda n, o: n if n.dtype == o.dtype else n.astype(o.dtype), new, old)


def _rows(leaf, g, slot_args, p, hd, kw, reads_params):
    """The dense formula on the touched rows of a row-sparse gradient (TF's `SparseApply*`)."""
    present = [k for k, s in enumerate(slot_args) if s is not None]

    def rule(g_rows, *rows):
        full = [None] * len(slot_args)
        for k, r in zip(present, rows[: len(present)], strict=False):
            full[k] = r
        extra_p = rows[len(present) :]
        res = leaf(g_rows, *full, *extra_p, hd, **kw)
        return (res[0], *(res[k + 1] for k in present))

    out = _sparse_rules.apply_rows(
        rule, g, *(slot_args[k] for k in present), param=p if reads_params else None
    )
    new = [None] * len(slot_args)
    for k, r in zip(present, out[1:], strict=True):
        new[k] = r
    return (out[0], *new)
