"""The constructor of the learning-rate-free rules: slots per parameter, global scalars from the whole tree.

Prodigy, D-Adaptation, DoG and DoWG keep slots shaped like the parameters and scalars (an
estimate of the distance to the solution, running sums of squared norms) that each step
updates from reductions over every element of every leaf. `gradtx.update_rule` derives its
scalars in `prepare`, before the formula sees a gradient, so these rules are declared here
instead, with the same division of labour: the formula (`step`) gets the lists of the
gradients, slots and parameters of the leaves that have a gradient and the step's scalars,
and returns the updates, the new slots and the new scalars; `tree_rule` owns the count, the
hyperparameters (Python numbers stay numbers, as in `update_rule`'s dtype policy; arrays and
schedules' values are cast to the scalars' dtype), `None` and row-sparse leaves (densified),
slots placed like their parameters, the scalars' dtype (float32, float64 for float64
parameters), the tree checks and the state class (`restated_tree` gives optax's layouts).

A formula passes every reduction over elements through `gradtx._core.sliced.total`, so the rule
is exact on ZeRO's slices (`parallel.sharded_state`) and on packed parameters.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import naming as _naming
from gradtx._core import packed as _packed
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import row_sparse as _row_sparse
from gradtx._core import rule_parts as _leaves
from gradtx._core import scalars as _scalars
from gradtx._core import sliced as _sliced
from gradtx._core import vma as _vma
from gradtx._core import walk as _walk


class _TreeRule(NamedTuple):
    """`tree_rule`'s arguments, kept on the transform's `init` for `restated_tree`."""

    name: str
    state: Any
    step: Callable[..., tuple[Any, ...]]
    slots: Mapping[str, Any]
    scalars: Mapping[str, Callable[..., Any]]
    hyper: Mapping[str, Any]
    kind: type
    real_only: str | None


def total_sum(xs: list[Any]) -> jax.Array:
    """`sum(xs)` of per-leaf partial sums, as the sum over every element (exact on ZeRO's slices too)."""
    return _sliced.total(sum(xs[1:], xs[0]))


def sq_norm(xs: list[Any]) -> jax.Array:
    """The squared L2 norm of all the arrays `xs` together (`optax.tree.norm(x, squared=True)`)."""
    return total_sum([jnp.sum(_formulas.abs_sq(x)) for x in xs])


def tree_rule(
    name: str,
    state: Any,
    step: Callable[..., tuple[Any, ...]],
    *,
    slots: Mapping[str, Any],
    scalars: Mapping[str, Callable[..., Any]],
    hyper: Mapping[str, Any] | None = None,
    kind: type = _protocol.ElementWise,
    real_only: str | None = "its global scalars are of real vectors",
) -> _protocol.GradientTransformation:
    """A rule whose scalars follow reductions over the whole tree (see the module docstring).

    Args:
      name: the building block's public name (errors name it).
      state: the state's NamedTuple class: `count` (if any), the slots, the scalars.
      step: `step(gs, *slot_lists, ws, h) -> (updates, *new_slot_lists, {scalar: value})`; `h`
        holds the hyperparameters, `count`, `t` (None without a count) and the scalars' current
        values.
      slots: `{field: initial value}`: a number (an array shaped like the parameter) or a
        function of the parameter (`jnp.copy`: the initial point).
      scalars: `{field: init(h, params) -> value}`, `params` the list of parameter leaves: a
        float scalar of the params' dtype (float32, float64 for float64 params), or a bool flag.
      hyper: `{name: value}`: numbers, scalar arrays or schedules.
      kind: `gradtx.ElementWise` (every reduction through `_sliced.total`) or `gradtx.LeafWise`.
      real_only: refuse complex numbers, saying why (None: accept them).

    Returns:
      A transform of kind `kind`.
    """
    rule = _TreeRule(name, state, step, dict(slots), dict(scalars), dict(hyper or {}), kind, real_only)
    return _construct(rule, state, {})


def restated_tree(tx: Any, state: Any, rename: Mapping[str, str]) -> _protocol.GradientTransformation:
    """The rule `tx` (made by `tree_rule`) with its state in `state`, fields renamed by `rename`.

    Raises:
      TypeError: if `tx` was not made by `tree_rule`.
    """
    rule = getattr(getattr(_factory.unwrapped(tx), "init", None), "_gradtx_tree_rule", None)
    if rule is None:
        raise TypeError(f"`restated_tree`: {tx!r} was not made by `tree_rule`.")
    return _construct(rule, state, dict(rename))


def _construct(rule: _TreeRule, state_cls: Any, rename: Mapping[str, str]) -> Any:
    name, _, step, slots, scalars, hyper, kind, real_only = rule

    def field(f: str) -> str:
        return rename.get(f, f)

    has_count = field("count") in state_cls._fields
    if not has_count and _hyper.any_schedule(*hyper.values()):
        raise TypeError(f"`{name}`: {state_cls.__name__} keeps no count, and a hyperparameter is a schedule.")
    static = {k: _scalars.static(v) for k, v in hyper.items()}

    def resolve(count: Any, dtype: Any) -> dict[str, Any]:
        return {k: _scalars.cast(_hyper.resolve(v, count), dtype) for k, v in static.items()}

    def make_slot(spec: Any, p: Any) -> Any:
        return spec(p) if callable(spec) else _placement.filled(p, spec)

    def init_fn(params):
        leaves, treedef = jax.tree.flatten(params, is_leaf=_leaves.is_none)
        present = [p for p in leaves if p is not None]
        dtype = _scalars.variables_dtype(present)
        zero = _hyper.zero_count()
        h0 = types.SimpleNamespace(**resolve(zero, dtype))
        values: dict[str, Any] = {"count": zero} if has_count else {}
        for f, spec in slots.items():
            values[f] = treedef.unflatten([None if p is None else make_slot(spec, p) for p in leaves])
        for f, make in scalars.items():
            value = jnp.asarray(make(h0, present))
            values[f] = value if value.dtype == jnp.bool_ else value.astype(dtype)  # a flag stays a bool
        return state_cls(**{field(f): v for f, v in values.items()})

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(name)
        del extra_args  # none is read
        dense = _row_sparse.densify(updates)
        names = ("updates", "params", *(f"state.{field(f)}" for f in slots))
        slot_trees = [getattr(state, field(f)) for f in slots]
        leaves, (flat_params, *flat_slots), treedef = _walk.flatten_updates(
            name, dense, params, *slot_trees, names=names
        )
        _leaves.refuse_integers(name, dense, leaves, treedef, params, flat_params)
        if real_only is not None:
            _factory.refuse_complex(name, dense, params, why=real_only)
        count = getattr(state, field("count")) if has_count else None
        olds = {f: getattr(state, field(f)) for f in scalars}
        dtype = next(x.dtype for x in olds.values() if x.dtype != jnp.bool_)
        h = resolve(count, dtype)
        h["count"], h["t"] = count, (_hyper.increment(count) if has_count else None)
        h.update(olds)
        idx = [i for i, g in enumerate(leaves) if g is not None]
        outs, new_slots, new_scalars = list(leaves), [list(s) for s in flat_slots], dict(olds)
        if idx:
            res = step(
                [leaves[i] for i in idx],
                *[[s[i] for i in idx] for s in flat_slots],
                [flat_params[i] for i in idx],
                types.SimpleNamespace(**h),
            )
            new_scalars.update(res[-1])
            for j, i in enumerate(idx):
                outs[i] = _leaves.as_update(res[0][j], leaves[i])
                for k in range(len(flat_slots)):
                    new_slots[k][i] = _leaves.keep(res[k + 1][j], flat_slots[k][i])
        values: dict[str, Any] = {"count": h["t"]} if has_count else {}
        for k, f in enumerate(slots):
            values[f] = treedef.unflatten(new_slots[k])
        for f, old in olds.items():
            values[f] = _vma.typed_like(jnp.asarray(new_scalars[f]).astype(old.dtype), old)
        return treedef.unflatten(outs), state_cls(**{field(f): v for f, v in values.items()})

    result: _protocol.GradientTransformation
    if kind is _protocol.ElementWise:
        result = _protocol.ElementWise(init_fn, update_fn)
    else:
        result = _packed.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))
    result.init._gradtx_tree_rule = rule  # type: ignore[attr-defined]
    return _naming.named(result, name)
