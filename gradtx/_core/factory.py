"""Factories: `api` (what every public factory's result goes through), members, composites, interop.

Within the core, modules import downward only: `protocol` (the types, errors and kinds) ->
`checks` (argument checks) -> `hyper`, `formulas`, `walk` (shared math and tree walks) -> this
module -> `rule` (the rule constructor) and `chain`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import naming as _naming
from gradtx._core import packed as _packed
from gradtx._core import shapes as _shapes
from gradtx._core import vma as _vma
from gradtx._core import walk as _walk
from gradtx._core.protocol import ElementWise, GradientTransformation, LeafWise, SliceWise


def api(factory: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for public factories: what a user-called factory's transform goes through, once.

    `momentum(learning_rate=0.1, momentum=-1.0)` builds `trace(...)` inside; with this
    decorator the error says "`momentum`: `momentum` must be ..." rather than naming the
    internal building block. The outermost decorated factory (the one the user called)
    wraps its transform once: it accepts packed trees (unless it is `ElementWise` or
    `LeafWise` already, it is made leaf-wise, `packing.leaf_wise`); its `update` refuses
    gradients shaped unlike the params and returns the state in the dtypes it was given;
    its `init` types the state like the params under `shard_map(check_vma=True)`
    (`_vma.typed_like_params`). Factories it calls inside (an alias's chain and building
    blocks) return their transforms as they are, so a step runs these checks once, not at
    every nesting level; `with_extra_args_support` (which every combinator applies to its
    members) takes the inner transform of a wrapped member for the same reason. Every
    transform it returns carries its name (`gradtx._core.naming`: `adam`,
    `chain(scale_by_adam, scale_by_learning_rate)`), which a checkpoint records.
    """
    name = factory.__name__
    public_name = _naming.factory_name(factory)
    per_example_factory = takes_per_example_grads(factory)

    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        outer = _checks._API_NAME.get()
        token = _checks._API_NAME.set(outer or name)
        try:
            result = factory(*args, **kwargs)
        finally:
            _checks._API_NAME.reset(token)
        if not isinstance(result, GradientTransformation):
            return result
        tx_name = _naming.for_factory(public_name, result, args, kwargs)  # what a checkpoint records
        per_example = per_example_factory or takes_per_example_grads(result.update)
        if outer is not None:  # nested: the outermost factory wraps once
            if per_example and not takes_per_example_grads(result.update):
                result = type(result)(result.init, per_example_grads(_passing(result.update)))
            return _naming.named(result, tx_name)
        if _naming.given_name(result.update) is None:  # a combinator holding it names it so (`unwrapped`)
            _naming.label(result.update, tx_name)
        return _naming.named(wrapped_once(name, result, per_example), tx_name)

    return wrapper


def wrapped_once(name: str, raw: GradientTransformation, per_example: bool = False) -> GradientTransformation:
    """`raw` as the outermost factory returns it (see `api`); `unwrapped` gives `raw` back.

    For a function that returns transforms without being an `api` factory itself (the one
    `inject_hyperparams` returns), so that its transform is checked like any other.
    """
    result = _packed.leaf_wise(raw)
    # the step's updates NaN where a schedule's value left its range (`gradtx._core.scheduled`)
    result = _schedules_checked(result) if per_example else _shape_checked(name, result)
    if not _vma.is_typed(result.init):
        result = type(result)(_vma.typed_like_params(result.init), result.update)  # type: ignore[arg-type]
    if per_example:
        result = type(result)(result.init, per_example_grads(_passing(result.update)))
    result.update._gradtx_raw = raw  # type: ignore[attr-defined]
    return result


def _schedules_checked(tx: GradientTransformation) -> GradientTransformation:
    """`tx` whose step's updates are NaN where a schedule's value is out of its argument's range (the
    values `_hyper.resolve` collects, `gradtx._core.scheduled`); no schedule, no cost."""
    update = tx.update

    @functools.wraps(update)
    def checked(updates, state, params=None, **extra_args):
        with _checks.deferred() as intervals:
            new_updates, new_state = update(updates, state, params, **extra_args)
        return _checks.nan_unless(intervals, new_updates), new_state

    return type(tx)(tx.init, checked)


def unwrapped(tx: Any) -> Any:
    """The transform an outermost `api` factory wrapped (a member of a combinator needs no second check)."""
    raw = getattr(getattr(tx, "update", None), "_gradtx_raw", None)
    return tx if raw is None or takes_per_example_grads(tx.update) else raw


def per_example_grads(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a factory (or an `update`) whose updates are per-example gradients, `[B, *param_shape]`.

    Their shapes differ from the params' by design, so `api` does not check them against the
    params (the transform checks them itself); a chain whose first member is marked is
    marked too.
    """
    fn._gradtx_per_example = True  # type: ignore[attr-defined]
    return fn


def takes_per_example_grads(fn: Any) -> bool:
    """True for a factory or `update` marked by `per_example_grads`."""
    return bool(getattr(fn, "_gradtx_per_example", False))


def _passing(update: Callable[..., Any]) -> Callable[..., Any]:
    """A fresh function calling `update` (to carry a mark without touching `update` itself)."""

    def update_fn(updates, state, params=None, **extra_args):
        return update(updates, state, params, **extra_args)

    return update_fn


def _shape_checked(name: str, tx: GradientTransformation) -> GradientTransformation:
    """`tx` whose `update` refuses gradients (and state slots) shaped unlike the params, at trace time,
    makes the step's updates NaN where a schedule's value left its range (as `_schedules_checked`),
    and returns its state in the dtypes it was given (a slot updated with a wider gradient, say f32
    into a bf16 slot, is stored back in bf16, as TF stores a slot in its variable's dtype), so that
    a state can be the carry of `lax.scan`, `lax.cond` or `lax.while_loop`."""
    update = tx.update

    def update_fn(updates, state, params=None, **extra_args):
        updates, params = _shapes.numbers_as_arrays(updates), _shapes.numbers_as_arrays(params)
        _shapes.check_shapes(name, updates, params, state)
        with _checks.deferred() as intervals:  # the schedules' values (see `_schedules_checked`)
            new_updates, new_state = update(updates, state, params, **extra_args)
        return _checks.nan_unless(intervals, new_updates), _keep_dtypes(new_state, state)

    init = tx.init

    @functools.wraps(init)
    def init_fn(params):
        return init(_shapes.numbers_as_arrays(params))

    return type(tx)(init_fn, update_fn)


def refuse_complex(fn: str, updates: Any, params: Any, *, why: str) -> None:
    """Raise `TypeError` (at trace time) if a gradient or parameter of `fn`'s update is complex, naming its
    key path (computed for the error only)."""
    for what, tree in (("gradient", updates), ("parameter", params)):
        for i, x in enumerate(jax.tree.leaves(tree, is_leaf=_walk.is_row_sparse)):
            if x is not None and jnp.iscomplexobj(_walk.values_of(x)):
                path = jax.tree_util.tree_leaves_with_path(tree, is_leaf=_walk.is_row_sparse)[i][0]
                raise TypeError(
                    f"`{fn}`: the {what} at {jax.tree_util.keystr(path) or '(root)'} is complex "
                    f"({jnp.result_type(_walk.values_of(x))}), which this rule does not support: {why}. The "
                    "rules of sgd, momentum, adam (and its variants), rmsprop, adagrad, adadelta, ftrl and "
                    "lamb do, with second moments of |g|**2."
                )


_KINDS = (jnp.bool_, jnp.integer, jnp.floating, jnp.complexfloating)


def _kind(dtype: Any) -> Any:
    return next((k for k in _KINDS if jnp.issubdtype(dtype, k)), None)


def _keep_dtypes(new: Any, old: Any) -> Any:
    """`new` with every array leaf cast to the dtype of `old`'s leaf there (same structure), else `new`.

    Only within a kind (a float32 count promoted to float64 goes back; a float that a stateful
    schedule keeps where it started with an int stays a float: a cast would lose it)."""
    new_leaves, treedef = jax.tree.flatten(new)
    old_leaves, old_def = jax.tree.flatten(old)
    if treedef != old_def:  # type: ignore[operator]
        return new
    return jax.tree.unflatten(
        treedef,
        [
            n.astype(o.dtype)
            if hasattr(n, "dtype")
            and hasattr(o, "dtype")
            and n.dtype != o.dtype
            and _kind(n.dtype) == _kind(o.dtype)
            else n
            for n, o in zip(new_leaves, old_leaves, strict=True)
        ],
    )


def real_only(why: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a factory whose rule is wrong for complex numbers: its `update` refuses them.

    Every other rule treats complex parameters as optax does (second moments of `|g|**2`,
    norms of `|x|`); the registry-wide test checks that those steps rotate with the phase of
    the gradients and params. A rule that compares signs, orders values or decomposes
    matrices of real numbers is marked with this, and raises `TypeError` at trace time,
    saying `why`.
    """

    def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
        name = factory.__name__

        @functools.wraps(factory)
        def wrapper(*args, **kwargs):
            tx = factory(*args, **kwargs)
            update = tx.update

            def update_fn(updates, state, params=None, **extra_args):
                refuse_complex(name, updates, params, why=why)
                return update(updates, state, params, **extra_args)

            return type(tx)(tx.init, update_fn)

        return wrapper

    return decorate


def _accepts_extra_args(update: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(update)
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def _dropping_extra_args(update: Callable[..., Any]) -> Callable[..., Any]:
    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        return update(updates, state, params)

    return update_fn


def with_extra_args_support(tx: Any) -> GradientTransformation:
    """`tx` as a gradtx transform: its `update` accepts (and, if `tx` cannot take them, drops) extra args,
    and it accepts packed trees.

    gradtx's own transforms pass through unchanged. A foreign transform (e.g. an optax one
    whose `update` has no `**extra_args`), or one built by hand as a plain
    `GradientTransformation`, is wrapped so that a chain can feed extra arguments to its
    other members, and made leaf-wise (`gradtx.packing.leaf_wise`): on packed parameters it
    sees per-leaf views, as a transform of unknown kind must. Wrap it in `gradtx.ElementWise`
    first to declare that it treats elements alike.

    Args:
      tx: a transform (gradtx, optax or anything with `init` and `update`).

    Returns:
      An `ElementWise` or `LeafWise` transform whose `update` takes `**extra_args`.

    Raises:
      TypeError: if `tx` has no `init` and `update`.

    Example:
        >>> import jax.numpy as jnp, optax, gradtx
        >>> tx = gradtx.with_extra_args_support(optax.sgd(0.1))
        >>> u, _ = tx.update(jnp.ones(2), tx.init(jnp.zeros(2)), global_step=3)  # dropped for optax
        >>> u
        Array([-0.1, -0.1], dtype=float32)
    """
    _checks.check_transform("with_extra_args_support", "tx", tx)
    update = tx.update if _accepts_extra_args(tx.update) else _dropping_extra_args(tx.update)
    if isinstance(tx, (ElementWise, LeafWise)):
        if update is tx.update:
            return tx
        return _naming.named(type(tx)(tx.init, update), _naming.name_of(tx))
    return _naming.named(_packed.leaf_wise(GradientTransformation(tx.init, update)), _naming.name_of(tx))


def member(tx: Any) -> GradientTransformation:
    """A combinator's member: `with_extra_args_support` of the transform inside a wrapped one (`unwrapped`).

    The combinator is itself made by an `api` factory, whose outermost call checks shapes and
    keeps dtypes once for the whole tree of transforms; its members need not do it again.
    """
    return with_extra_args_support(unwrapped(tx))


def composite(
    init_fn: Callable[..., Any], update_fn: Callable[..., Any], *members: Any
) -> GradientTransformation:
    """A transform that runs `members` on the trees it is given (a chain, a wrapper), of their kind.

    `ElementWise` when every member is (its own rule must then treat elements alike too:
    routing, sums, element-wise arithmetic); `SliceWise` when each is `ElementWise` or
    `SliceWise` (its own rule then reduces only through `_sliced.total`); `LeafWise`
    otherwise -- it passes packed trees on, and its leaf-wise members unpack them
    (`with_extra_args_support` made them so). The members are kept on the `update`
    (`_gradtx_members`), so an error can name the one that is leaf-wise.
    """
    kind = ElementWise if all(isinstance(m, ElementWise) for m in members) else LeafWise
    if kind is LeafWise and all(isinstance(m, (ElementWise, SliceWise)) for m in members):
        kind = SliceWise  # runs on ZeRO's slices (`parallel.sharded_state`), per-leaf views when packed
    # the members, read by `sharded_state`'s error naming a leaf-wise one
    update_fn._gradtx_members = members  # type: ignore[attr-defined]
    return kind(init_fn, update_fn)
