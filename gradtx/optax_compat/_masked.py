"""optax's `masked` with optax's state layout: the inner transform sees `MaskedNode()` for masked-out params.

`gradtx.masked` hands its inner transform `None` for a masked-out parameter (gradtx's
convention); optax hands it `MaskedNode()`, an empty node that every tree map passes over,
so optax's inner state holds a `MaskedNode()` where a slot is left out, one for a whole
subtree that a prefix mask turns off. This module does what optax does, so a masked state is
optax's tree, node for node, and `optax.tree.map_params` and checkpoints made with optax read it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx.combinators import MaskedState


class MaskedNode(NamedTuple):
    """What the inner transform of `masked` sees for a masked-out parameter or subtree (optax's name).

    An empty node: tree maps pass over it, so the inner state has one where a slot is left out.
    """


def _is_function(mask: Any) -> bool:
    """optax's test: a mask is a function of the params when every leaf of it is callable."""
    leaves = jax.tree.leaves(mask)
    return bool(leaves) and all(callable(x) for x in leaves)


def _one(value: Any, selected: Any) -> Any:
    """A mask leaf's bool: the one it resolved to on every parameter under it (its own over none); the
    resolved bools themselves where they differ (key-path patterns that happen to fit the params)."""
    flags = jax.tree.leaves(selected)
    if not flags:
        return bool(value)
    if all(flags) or not any(flags):
        return flags[0]
    return selected


def _layout(mask: Any, tree: Any) -> Any:
    """The mask optax applies to `tree`: the mask's own tree (a False over a subtree hides it whole),
    with gradtx's resolution of its leaves; one bool per parameter for key-path patterns."""
    raw = mask(tree) if _is_function(mask) else mask
    flags = _masks.resolve_mask("masked", raw, tree)  # validates: a prefix of `tree`, bools
    treedef: Any = jax.tree.structure(raw)  # a PyTreeDef
    try:
        under = treedef.flatten_up_to(flags)
    except (ValueError, TypeError):  # key-path patterns: no prefix of the params
        return flags
    return treedef.unflatten([_one(v, s) for v, s in zip(jax.tree.leaves(raw), under, strict=True)])


def _hide(layout: Any, tree: Any) -> Any:
    """`tree` with `MaskedNode()` for every part that `layout` turns off (optax's `mask_pytree`)."""
    return jax.tree.map(lambda keep, x: x if keep else MaskedNode(), layout, tree)


@_factory.api
def masked(
    inner: Any, mask: Any, *, mask_compatible_extra_args: bool = False
) -> _protocol.GradientTransformation:
    """Apply `inner` to the selected parameters only; the other updates pass through (optax's `masked`).

    As in optax, `inner` is initialised and updated with `MaskedNode()` in place of each
    masked-out parameter (one for a whole subtree that a prefix of the mask turns off), so its
    state has optax's layout, `MaskedNode()` where a slot is left out, and global reductions
    (norms) see the selected parameters only. A function `mask` is called on the params at
    `init` and on the updates at `update`, as optax does. `gradtx.masked` routes the same way
    but gives its inner transform `None` (gradtx's layout).

    Args:
      inner: the transform for the selected parameters.
      mask: True where `inner` applies: a tree of bools with the structure of the params or a
        prefix of it, or a function `params -> tree` (or a list of key-path patterns, as
        `gradtx.masked` takes). Empty params take an empty container of their type
        (`[]`, `()`, `{}`), as in optax.
      mask_compatible_extra_args: if True, an extra argument of `update` with the tree structure
        of the updates is masked as the updates are before it reaches `inner`; otherwise every
        extra argument reaches `inner` as it is.

    Returns:
      A `GradientTransformation` with state `MaskedState(inner_state)`.

    Raises:
      TypeError: for a bad `inner` or `mask`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.masked(optax.adam(0.1), {"w": True, "b": False})
        >>> g = {"w": jnp.ones(1), "b": jnp.ones(1)}
        >>> tx.init(g).inner_state[0].mu
        {'b': MaskedNode(), 'w': Array([0.], dtype=float32)}
        >>> tx.update(g, tx.init(g))[0]["b"]
        Array([1.], dtype=float32)
    """
    if mask is None or jax.tree.leaves(mask):  # an empty container is the mask of empty params
        _masks.check_mask("masked", mask)
    _checks.check_transform("masked", "inner", inner)
    inner = _factory.member(inner)

    def init_fn(params):
        if _masks.is_placeholder(params):  # `optax.tree.map_params` finds the slots: they stay whole
            return MaskedState(inner.init(params))
        return MaskedState(inner.init(_hide(_layout(mask, params), params)))

    def update_fn(updates, state, params=None, **extra_args):
        layout = _layout(mask, updates)
        if mask_compatible_extra_args:
            shape = jax.tree.structure(updates)
            extra_args = {
                k: _hide(layout, v) if jax.tree.structure(v) == shape else v for k, v in extra_args.items()
            }
        new, inner_state = inner.update(
            _hide(layout, updates),
            state.inner_state,
            None if params is None else _hide(layout, params),
            **extra_args,
        )
        out = jax.tree.map(lambda keep, u, g: u if keep else g, layout, new, updates)
        return out, MaskedState(inner_state)

    return _protocol.GradientTransformation(init_fn, update_fn)
