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

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import lowbit as _lowbit
from gradtx._core import matrix_work as _matrix_work
from gradtx._core import naming as _naming
from gradtx._core import packed as _packed
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import rule_parts as _leaves
from gradtx._core import scalars as _scalars
from gradtx._core import slot_formats as _slot_formats
from gradtx._core import vma as _vma
from gradtx._core import walk as _walk
from gradtx._core.rule_parts import SQUARES as SQUARES
from gradtx._core.rule_parts import TREE_SCALARS as TREE_SCALARS
from gradtx._core.rule_parts import Slot as Slot
from gradtx._core.rule_parts import first_step as first_step

_NO_STATE = _protocol.EmptyState()


def update_rule(
    name: str,
    state: Any,
    leaf: Callable[..., tuple[Any, ...]],
    *,
    hyper: Mapping[str, Any] | None = None,
    slots: Mapping[str, Any] | None = None,
    scalars: Mapping[str, Callable[[Any], Any]] | None = None,
    prepare: Callable[..., Mapping[str, Any]] | None = None,
    sparse: Literal["densify", "rows"] | Callable[..., tuple[Any, ...]] = "densify",
    reads_params: bool = False,
    kind: type = _protocol.ElementWise,
    count: Literal["always", "if_scheduled", "never"] = "always",
    tf_scalars: bool = False,
    extra: Mapping[str, Any] | None = None,
    over: Literal["leaf", "tree"] = "leaf",
    paths: bool = False,
    real_only: str | None = None,
    compute_dtype: Callable[[Any], Any] | None = None,
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
      compute in float32 as TF's kernels do; the TF parity tests prove each such rule. A
      leaf's dtype is its gradient's (the real dtype for a complex gradient: scalars are
      real), or what `compute_dtype` makes of it for a rule that computes in a wider dtype
      (float32 statistics for bf16 leaves: `compute_dtype=_scalars.at_least_float32`).
    - **`None` leaves**: the update is `None` and the slots are kept (a variable without a
      gradient, or masked out).
    - **row-sparse leaves** (`gradtx.sparse.RowSparse`): `sparse="densify"` densifies them;
      `"rows"` applies the formula to the touched rows only (TF's `SparseApply*`: the rows
      of each slot and of `w` are gathered, the new rows scattered back, the update is
      row-sparse); a function takes the `RowSparse` gradient and the whole slots itself.
    - **slots**: `slots` maps each slot field of `state` to its initial value: a number
      or a `Slot(fill, dtype)` gives an array shaped like the parameter, `None` no slot, a
      function of one parameter any other array or pytree (made with `gradtx._core.placement`;
      with `paths=True` it gets the leaf's key path too, `path=`, for `gradtx._core.sliced.leaf_shape`);
      a field annotated `SlotDict` holds `{name: tree}` and its function gives one dict per
      parameter (the formula sees and returns that dict).
      Every slot is created placed like its parameter in each mode (eager, `jit` with Auto
      or Explicit axes, `shard_map`, `jax.ShapeDtypeStruct`); after each step it is cast
      back to its dtype (a bf16 slot updated with an f32 gradient stays bf16); a slot shaped
      like its parameter is checked against the gradient's shape at trace time.
    - **scalars**: `scalars` maps each non-slot field of `state` (TF's `beta1_power`) to a
      function of the hyperparameters at count 0 (`h.params`: the list of parameter leaves)
      giving its initial value (in the scalar dtype of the params; a bool stays a bool flag);
      the formula sees the current values in `h`, and `prepare(h, state, extra_args)` returns
      the new values under the same names (and anything else the formula needs), once per step.
    - **the kind**: `kind` is `ElementWise` (the formula treats elements alike; runs on
      packed parameters as they are), `LeafWise` (it needs whole leaves: a norm, a shape;
      on packed parameters it runs on per-leaf views, `gradtx.packing.leaf_wise`) or
      `SliceWise` (a `LeafWise` rule whose per-leaf reductions go through
      `gradtx._core.sliced`, e.g. `formulas.leaf_norm`, `sliced.leaf_means`: ZeRO runs it on slices).
    - **the state**: `state(count, *slots, *scalars)`; with `count="if_scheduled"` and no
      schedule among the hyperparameters, `EmptyState()` (a rule without slots);
      `count="never"` keeps no count (optax's `ScaleByRmsState(nu)`; no schedules then).

    A formula whose step does work on each matrix of a leaf (an orthogonalisation, an
    eigendecomposition, a matrix root) is written as a generator that yields that work, a
    `gradtx._core.matrix_work.MatrixWork`, and receives its results: the constructor runs every
    leaf up to its `yield` and hands the step's work over at once, done where each leaf is by
    default, or stacked by shape and split across the devices under
    `gradtx.parallel.split_matrix_work`.

    `over="tree"` is for rules that combine all leaves (GGT's Gram matrix; the learning-rate-free rules,
    whose scalars follow sums over every element): the formula then takes lists, `leaf(gs, *slot_lists,
    [ws], h) -> (updates, *new_slot_lists[, {scalar: new value}])`, of the leaves that have a gradient
    (row-sparse ones densified); such a formula passes every sum over elements through
    `gradtx._core.formulas.total_sum`, which stays exact on ZeRO's slices. It may yield its matrix work
    too, as a list of `MatrixWork` (PSGD Kron: each leaf's factor update and preconditioning).
    `paths=True` gives the formula the leaf's key path (`path=`, a `jax.tree_util` key path);
    `real_only` (a reason) refuses complex gradients and parameters at trace time. `extra` names the
    extra arguments of `update` that the formula reads, with defaults.

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
      kind: `gradtx.ElementWise` or `gradtx.LeafWise` (gradtx's own rules that reduce only over
        a tensor's slices use a third, internal kind).
      count: `"always"`, `"if_scheduled"` for a stateless rule with schedules, or `"never"`.
      tf_scalars: TF's float32 scalar arithmetic, as above.
      extra: `{name: default}` of extra arguments the formula reads.
      over: `"leaf"`, or `"tree"` for a rule over all leaves together.
      paths: give the formula the leaf's key path.
      real_only: refuse complex numbers, saying why.
      compute_dtype: `gradient dtype -> dtype` of the scalars the formula gets (default: the
        gradient's real dtype).

    Returns:
      A transform of kind `kind`.

    Example:
        >>> from typing import NamedTuple
        >>> import jax.numpy as jnp, gradtx
        >>> class HeavyBallState(NamedTuple):
        ...     count: gradtx.OptState
        ...     velocity: gradtx.Updates
        >>> def heavy_ball(g, velocity, h):  # the formula, for one parameter
        ...     velocity = h.beta * velocity + g
        ...     return velocity, velocity
        >>> tx = gradtx.update_rule("heavy_ball", HeavyBallState, heavy_ball, hyper={"beta": 0.5},
        ...                         slots={"velocity": 0.0})
        >>> state = tx.init({"w": jnp.zeros(2)})
        >>> for _ in range(2):
        ...     u, state = tx.update({"w": jnp.ones(2)}, state)
        >>> u["w"], int(state.count), state.velocity["w"]
        (Array([1.5, 1.5], dtype=float32), 2, Array([1.5, 1.5], dtype=float32))
    """
    declaration = _Declaration(
        name, state, leaf, hyper, slots, scalars, prepare, sparse, reads_params, kind, count, tf_scalars,
        extra, over, paths, real_only, compute_dtype,
    )  # fmt: skip
    return _construct(declaration, state, {})


class _Declaration(NamedTuple):
    """`update_rule`'s arguments, kept on the transform's `init` for `restated`."""

    name: str
    state: Any
    leaf: Callable[..., tuple[Any, ...]]
    hyper: Mapping[str, Any] | None
    slots: Mapping[str, Any] | None
    scalars: Mapping[str, Callable[[Any], Any]] | None
    prepare: Callable[..., Mapping[str, Any]] | None
    sparse: Any
    reads_params: bool
    kind: type
    counting: str  # update_rule's `count` (a tuple's `count` is a method)
    tf_scalars: bool
    extra: Mapping[str, Any] | None
    over: str
    paths: bool
    real_only: str | None
    compute_dtype: Callable[[Any], Any] | None


def _construct(declaration: _Declaration, state_cls: Any, rename: Mapping[str, str]) -> Any:
    """`update_rule`'s transform for `declaration`, its state in `state_cls` (fields renamed by `rename`)."""
    (
        name, state, leaf, hyper, slots, scalars, prepare, sparse, reads_params, kind, count, tf_scalars,
        extra, over, paths, real_only, compute_dtype,
    ) = declaration  # fmt: skip
    hyper = dict(hyper or {})
    slot_specs = dict(slots or {})
    scalar_inits = dict(scalars or {})
    extra = dict(extra or {})
    fields = state._fields
    if count == "never" and _hyper.any_schedule(*hyper.values()):
        raise TypeError(f"`update_rule` ({name}): a rule with count='never' takes no schedules.")
    has_count = count == "always" or (count == "if_scheduled" and _hyper.any_schedule(*hyper.values()))
    count_field = rename.get("count", "count")
    stateless = not has_count and count != "never"  # EmptyState()

    def field(f: str) -> str:
        return rename.get(f, f)

    undeclared = [f for f in fields if f != "count" and f not in slot_specs and f not in scalar_inits]
    if undeclared or (has_count and "count" not in fields):
        raise TypeError(
            f"`update_rule` ({name}): the fields {undeclared} of {state.__name__} are not declared."
        )
    slot_names = [f for f in fields if f in slot_specs]
    live = [f for f in slot_names if slot_specs[f] is not None]
    like_param = {f for f in live if not _checks.is_schedule(slot_specs[f])}  # a fill value or a `Slot`
    scalar_names = [f for f in fields if f in scalar_inits]
    dict_fields = {f for f in live if _protocol.mark_of(state, f) is _protocol.SLOT_DICT}
    n_slots = len(slot_names)
    checked = [k for k, f in enumerate(slot_names) if f in like_param]
    # slots made by a function of the parameter (windows, factored statistics, per-leaf scalars)
    derived = [
        k for k, f in enumerate(slot_names) if f in live and f not in like_param and f not in dict_fields
    ]
    static = {k: _scalars.static(v) for k, v in hyper.items() if not _checks.is_schedule(v)}
    schedules = {k: v for k, v in hyper.items() if _checks.is_schedule(v)}

    def resolve(count_: Any, dtype: Any) -> dict[str, Any]:
        h = dict(static)
        for k, v in schedules.items():
            h[k] = _hyper.resolve(v, count_, k)
        if tf_scalars:
            h = {k: _scalars.as_scalar(v, dtype) for k, v in h.items()}
        return h

    # ------------------------------------------------------------------ init

    def init_slot(spec: Any, p: Any, path: Any) -> Any:
        if _checks.is_schedule(spec):  # a function of the parameter
            return spec(p, path=path) if paths else spec(p)
        spec = spec if isinstance(spec, Slot) else Slot(spec)
        fill = _hyper.resolve(spec.fill, _hyper.zero_count())
        fmt = spec.dtype if spec.dtype is not None else _slot_formats.format_for(p, spec.nonnegative, path)
        if _lowbit.is_format(fmt):  # codes and scales, bf16 and a key (`gradtx.low_bit_state`, or declared)
            number = float(fill) if _scalars.is_python_number(fill) else None  # every element: one number
            return fmt.store(_placement.filled(p, fill), fill=number)
        return _placement.filled(p, fill, spec.dtype)

    def init_fn(params):
        if stateless:
            return _NO_STATE
        zero = _hyper.zero_count()
        values: dict[str, Any] = {"count": zero} if has_count else {}
        with_paths, treedef = jax.tree_util.tree_flatten_with_path(params, is_leaf=_leaves.is_none)
        paths, param_leaves = [k for k, _ in with_paths], [p for _, p in with_paths]
        if scalar_inits:
            dtype = _scalars.variables_dtype(jax.tree.leaves(params))
            present = [p for p in param_leaves if p is not None]
            h0 = types.SimpleNamespace(**resolve(zero, dtype), params=present)
            for f in scalar_names:
                value = jnp.asarray(scalar_inits[f](h0))
                values[f] = value if value.dtype == jnp.bool_ else value.astype(dtype)  # a flag stays a bool
        for f in slot_names:
            spec = slot_specs[f]
            if spec is None:
                values[f] = None
                continue
            per_param = [
                None if p is None else init_slot(spec, p, path)
                for p, path in zip(param_leaves, paths, strict=True)
            ]
            values[f] = (
                _leaves.transposed(treedef, per_param) if f in dict_fields else treedef.unflatten(per_param)
            )
        return state_cls(**{field(f): v for f, v in values.items()})

    # ------------------------------------------------------------------ update

    def step_scalars(state_, leaves, flat_params, extra_args):
        """The step's scalars: hyperparameters at `count`, `count`, `t`, extra arguments, `prepare`'s."""
        count_ = getattr(state_, count_field) if has_count else None
        olds = {f: getattr(state_, field(f)) for f in scalar_names}
        dtype = next(
            (x.dtype for x in olds.values() if x.dtype != jnp.bool_),
            _scalars.variables_dtype(leaves if flat_params is None else flat_params),
        )
        h = resolve(count_, dtype)
        h["count"], h["t"] = count_, (_hyper.increment(count_) if has_count else None)
        for f, value in olds.items():  # the scalars' current values, where no hyperparameter has the name
            h.setdefault(f, value)  # (`prepare`, or a formula over the tree, gives the new ones)
        for k, default in extra.items():
            h[k] = extra_args.get(k, default)
        if prepare is not None:
            h.update(prepare(types.SimpleNamespace(**h), state_, extra_args))
        return h

    def new_state(state_, h, treedef, new_slots):
        if stateless:
            return state_
        values = {"count": h["t"]} if has_count else {}
        for k, f in enumerate(slot_names):
            if f not in live:
                values[f] = None
            else:
                values[f] = (_leaves.transposed if f in dict_fields else _leaves.unflatten)(
                    treedef, new_slots[k]
                )
        for f in scalar_names:
            old = getattr(state_, field(f))
            values[f] = _vma.typed_like(jnp.asarray(h[f]).astype(old.dtype), old)
        return state_cls(**{field(f): v for f, v in values.items()})

    def update_fn(updates, state, params=None, **extra_args):
        if reads_params and params is None:
            raise _protocol.missing_params(name)
        leaves, treedef = jax.tree.flatten(updates, is_leaf=_walk.is_update_leaf)
        flat_slots = [
            _leaves.flat_slot(name, treedef, updates, getattr(state, field(f)), field(f), f in dict_fields)
            if f in live
            else [None] * len(leaves)
            for f in slot_names
        ]
        flat_params = _leaves.flatten_up_to(name, treedef, updates, params, None) if reads_params else None
        _leaves.refuse_integers(name, updates, leaves, treedef, params, flat_params)
        if real_only is not None:
            _factory.refuse_complex(name, updates, params, why=real_only)
        scalars_for = _leaves.per_dtype(step_scalars(state, leaves, flat_params, extra_args), compute_dtype)
        outs, new_slots = list(leaves), [list(s) for s in flat_slots]
        if over == "tree":
            scalars_for.h.update(
                _leaves.over_tree(leaf, leaves, flat_slots, flat_params, scalars_for, outs, new_slots)
            )
        else:
            path_list = _leaves.key_paths(updates) if paths else None
            derived_shapes: dict[Any, Any] = {}
            pending: dict[int, Any] = {}

            def finish(i: int, res: Any) -> None:
                outs[i] = _leaves.as_update(res[0], leaves[i])
                for k in range(n_slots):
                    new_slots[k][i] = _leaves.keep(res[k + 1], flat_slots[k][i])

            for i, g in enumerate(leaves):  # one leaf at a time: the formula is one call away
                if g is None:
                    continue
                stored = [s[i] for s in flat_slots]  # a low-bit slot as it is stored
                for k in checked:
                    _leaves.check_slot(name, g, stored[k], slot_names[k], updates, i)
                for k in derived:
                    path = path_list[i] if paths else None
                    want = _leaves.slot_shape_for(slot_specs[slot_names[k]], g, derived_shapes, path)
                    if want is not None:
                        _leaves.check_slot(name, g, stored[k], slot_names[k], updates, i, want)
                slot_args = [_lowbit.values(s) for s in stored]  # ... and its values
                w = (flat_params[i],) if reads_params else ()
                h = scalars_for(_leaves.dtype_of(name, g, updates, i))
                kw = {"path": path_list[i]} if paths else {}
                if not _walk.is_row_sparse(g):
                    res = leaf(g, *slot_args, *w, h, **kw)
                elif sparse == "densify":
                    res = leaf(g.todense(), *slot_args, *w, h, **kw)
                elif sparse == "rows":  # a stored slot reads and stores the touched rows only
                    res = _leaves.rows(leaf, g, stored, w, h, kw)
                else:
                    res = sparse(g, *slot_args, *w, h, **kw)
                _matrix_work.begin(i, res, pending, finish)  # a formula may yield its matrix work
            _matrix_work.drive(pending, finish)  # all leaves' matrix work at once
        return treedef.unflatten(outs), new_state(state, scalars_for.h, treedef, new_slots)

    result: _protocol.GradientTransformation
    if kind is _protocol.ElementWise:
        result = _protocol.ElementWise(init_fn, update_fn)
    else:
        result = _packed.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))  # per-leaf views
        if kind is _protocol.SliceWise:
            result = _protocol.SliceWise(*result)
    result.init._gradtx_rule = declaration  # type: ignore[attr-defined]
    return _naming.named(result, name)  # a public factory returning it names it after itself
