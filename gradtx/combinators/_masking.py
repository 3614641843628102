"""Routing by parameter: `masked`, `freeze`, `partition` (optax's multi_transform)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import masks as _masks
from gradtx._core import packed as _packed
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk

Mask = Any
"""What selects parameters, as in `optax.masked`: a tree of bools (Python, numpy or 0-d arrays)
shaped like the params or a prefix of it (`True`; `{"encoder": True, "head": False}` over
nested params), a function `params -> such a tree`, or a list of key-path patterns. A callable
whose own tree fits the params (an equinox Module of bools) is a tree, not a function."""


def _is_empty_tree(mask: Any) -> bool:
    """An empty container (`[]`, `()`, `{}`, ...): the mask of empty params, as `optax.masked` takes it."""
    return mask is not None and not callable(mask) and not jax.tree.leaves(mask)


def by_structure(raw: Any, routing: Any, members: Any) -> _protocol.GradientTransformation:
    """`raw`, a transform routing by `routing`: `SliceWise` when that is a tree, key-path patterns or a
    function of the whole leaves' shapes (`_masks.ShapeLabels`) and every member runs on slices -- ZeRO's
    flat slices keep the tree and its key paths, so they are routed as the whole leaves are
    (`parallel.sharded_state` takes it inside `shard_map`); leaf-wise when it is another function of the
    params, which may read their shapes."""
    on_slices = (_protocol.ElementWise, _protocol.SliceWise)
    by_function = callable(routing) and not isinstance(routing, _masks.ShapeLabels)
    if by_function or not all(isinstance(m, on_slices) for m in members):
        return raw
    return _protocol.SliceWise(*_packed.leaf_wise(raw))


def _check_mask(fn: str, mask: Any) -> None:
    if not _is_empty_tree(mask):  # `_masks.check_mask` takes an empty container for a non-bool leaf
        _masks.check_mask(fn, mask)


class MaskedState(NamedTuple):
    """State of `masked`: the inner state, kept for the selected parameters only."""

    inner_state: Any


@_registry.wrapper()
def masked(inner: Any, mask: Mask) -> _protocol.GradientTransformation:
    """Apply `inner` to the selected parameters only; the other updates pass through unchanged.

    The inner transform is initialised and updated with the masked-out parameters
    replaced by `None`, so it keeps no slots for them and global reductions (norms) see
    only the selected ones. Same semantics as `optax.masked`.

    Args:
      inner: the transform for the selected parameters.
      mask: True where `inner` applies: a tree of bools with the structure of the params
        or a prefix of it, a function `params -> tree`, or a list of key-path patterns
        (`"*/bias"`, `"embed"`); see `Mask`. Empty params take an empty container of
        their type (`[]`, `()`, `{}`), as in optax.

    Returns:
      A `GradientTransformation` with state `MaskedState(inner_state)`.

    Raises:
      TypeError: for a bad `inner` or `mask`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.masked(gradtx.scale(0.0), ["bias"])
        >>> params = {"kernel": jnp.ones(2), "bias": jnp.ones(2)}
        >>> out, _ = tx.update(params, tx.init(params), params)
        >>> out["kernel"], out["bias"]
        (Array([1., 1.], dtype=float32), Array([0., 0.], dtype=float32))
    """
    _checks.check_transform("masked", "inner", inner)
    _check_mask("masked", mask)
    return route(
        inner,
        lambda updates, params: _masks.resolve_mask("masked", mask, updates if params is None else params),
        functools.partial(_masks.select, "masked"),
        functools.partial(_masks.merge, "masked"),
        routing=mask,
    )


def route(
    inner: Any,
    layout: Callable[[Any, Any], Any],
    hide: Callable[[Any, Any], Any],
    merge: Callable[[Any, Any, Any], Any],
    *,
    routing: Any,
    mask_extra_args: bool = False,
) -> _protocol.GradientTransformation:
    """`masked`'s transform: `layout(updates, params)` resolves the mask `routing`, `hide(m, tree)` is
    what `inner` sees of a tree (gradtx: `None` for a masked-out leaf; optax_compat's: optax's
    `MaskedNode()`), `merge(m, new, updates)` the updates out; with `mask_extra_args`, an extra argument
    shaped like the updates is hidden as they are. Its kind: `by_structure`."""
    inner = _factory.member(inner)

    def init_fn(params):
        if _masks.is_placeholder(params):  # `optax.tree.map_params` finds the slots: they stay whole
            return MaskedState(inner.init(params))
        return MaskedState(inner.init(hide(layout(params, params), params)))

    def update_fn(updates, state, params=None, **extra_args):
        m = layout(updates, params)
        if mask_extra_args:
            shape = jax.tree.structure(updates)
            extra_args = {
                k: hide(m, v) if jax.tree.structure(v) == shape else v for k, v in extra_args.items()
            }
        sub_params = None if params is None else hide(m, params)
        new, inner_state = inner.update(hide(m, updates), state.inner_state, sub_params, **extra_args)
        return merge(m, new, updates), MaskedState(inner_state)

    return by_structure(_protocol.GradientTransformation(init_fn, update_fn), routing, [inner])


@_registry.transform()
def freeze(mask: Mask) -> _protocol.GradientTransformation:
    """Zero the updates of the selected parameters, so they stay as they are.

    Args:
      mask: True for the frozen parameters (a tree of bools shaped like the params or a
        prefix of it, a function `params -> tree`, or a list of key-path patterns; see `Mask`).

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Raises:
      TypeError: for a bad `mask`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.sgd(0.1), gradtx.freeze(["encoder"]))
        >>> params = {"encoder": jnp.ones(2), "head": jnp.ones(2)}
        >>> out, _ = tx.update(params, tx.init(params), params)
        >>> gradtx.apply_updates(params, out)
        {'encoder': Array([1., 1.], dtype=float32), 'head': Array([0.9, 0.9], dtype=float32)}
    """
    _check_mask("freeze", mask)

    def zero(g):
        if _walk.is_row_sparse(g):
            return g.with_values(jnp.zeros_like(g.values))
        return jnp.zeros_like(g)

    def init_fn(params):
        if not _masks.is_placeholder(params):  # fail early on a bad mask
            _masks.resolve_mask("freeze", mask, params)
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        m = _masks.resolve_mask("freeze", mask, params if params is not None else updates)
        return _walk.map_updates(
            "freeze", lambda frozen, g: zero(g) if frozen else g, m, updates, names=("mask", "updates")
        ), state

    return by_structure(_protocol.GradientTransformation(init_fn, update_fn), mask, [])


def check_partition(transforms: Any, param_labels: Any) -> None:
    """`partition`'s arguments (gradtx's and optax_compat's): a non-empty dict of transforms, labels."""
    if not isinstance(transforms, Mapping) or not transforms:
        raise TypeError(
            f"`partition`: `transforms` must be a non-empty dict label -> transform, got {transforms!r}."
        )
    for label, tx in transforms.items():
        _checks.check_transform("partition", f"transforms[{label!r}]", tx)
    if param_labels is None:  # no labels at all: every update would be None and nothing would train
        raise TypeError(
            "`partition`: `param_labels` must be a tree of labels (shaped like the params or a prefix of "
            "them) or a function `params -> labels`, got None."
        )


@_registry.wrapper()
def partition(
    transforms: Mapping[Hashable, Any], param_labels: Any | Callable[[Any], Any]
) -> _protocol.GradientTransformation:
    """Apply a different transform to each group of parameters (optax's `multi_transform`).

    Each transform sees only the parameters of its label (the others are `None` to it),
    so it keeps slots and computes norms for its own group only.

    Args:
      transforms: label -> transform.
      param_labels: a tree of labels with the structure of the params (or a prefix of it:
        a label stands for every parameter under it), or a function
        `params -> tree of labels`.

    Returns:
      A `GradientTransformation` whose state is ``{label: inner_state}``.

    Raises:
      TypeError: for a non-transform value, or `param_labels=None`.
      ValueError: (at init) for a label with no transform, or a parameter with no label.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.partition({"fast": gradtx.sgd(1.0), "slow": gradtx.sgd(0.1)},
        ...                       {"w": "fast", "b": "slow"})
        >>> params = {"w": jnp.ones(1), "b": jnp.ones(1)}
        >>> out, _ = tx.update(params, tx.init(params), params)
        >>> out["w"], out["b"]
        (Array([-1.], dtype=float32), Array([-0.1], dtype=float32))
    """
    check_partition(transforms, param_labels)
    txs = {k: _factory.member(v) for k, v in transforms.items()}

    def labels_of(params):
        labels = _masks.resolve_prefix("partition", "param_labels", param_labels, params, lambda x: x)
        leaves, treedef = jax.tree.flatten(labels, is_leaf=lambda x: x is None)
        unknown = sorted({repr(x) for x in leaves if x is not None and x not in txs})
        if unknown:
            raise ValueError(
                f"`partition`: `param_labels` uses {', '.join(unknown)}, which have no transform; "
                f"`transforms` has {sorted(map(repr, txs))}."
            )
        unlabelled = [
            path
            for (path, x), p in zip(
                jax.tree_util.tree_flatten_with_path(labels, is_leaf=lambda x: x is None)[0],
                treedef.flatten_up_to(params),
                strict=True,
            )
            if x is None and p is not None
        ]
        if unlabelled:
            raise ValueError(
                f"`partition`: `param_labels` gives no label to the parameters at "
                f"{', '.join(jax.tree_util.keystr(k) for k in unlabelled[:5])}"
                f"{f' (and {len(unlabelled) - 5} more)' if len(unlabelled) > 5 else ''}; label every "
                f"parameter with one of {sorted(map(repr, txs))} (a `set_to_zero()` transform freezes some)."
            )
        return {k: treedef.unflatten([None if x is None else x == k for x in leaves]) for k in txs}

    def init_fn(params):
        masks = labels_of(params)
        return {k: tx.init(_masks.select("partition", masks[k], params)) for k, tx in txs.items()}

    def update_fn(updates, state, params=None, **extra_args):
        masks = labels_of(params if params is not None else updates)
        out, new_state = updates, {}
        for k, tx in txs.items():
            sub = None if params is None else _masks.select("partition", masks[k], params)
            u, new_state[k] = tx.update(
                _masks.select("partition", masks[k], updates), state[k], sub, **extra_args
            )
            out = _masks.merge("partition", masks[k], u, out)
        return out, new_state

    return by_structure(_protocol.GradientTransformation(init_fn, update_fn), param_labels, txs.values())
