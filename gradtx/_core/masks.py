"""Which parameters a wrapper touches: masks (trees of bools, prefixes, functions, key-path patterns).

`masked`, `freeze`, `partition`, the weight decays, `compute_gradients(var_list=)` and
`optimize_loss(variables=)` resolve their selection here, so they accept the same masks as
`optax.masked`: a tree of bools shaped like the params or a prefix of it (`True`,
`{"encoder": True, "head": False}`), a function `params -> such a tree`, or a list of
key-path patterns. A callable that is itself a tree fitting the params (an equinox Module
of bools) is a tree, not a function.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import sliced as _sliced
from gradtx._core import walk as _walk


def _is_patterns(mask: Any) -> bool:
    return isinstance(mask, (list, tuple)) and bool(mask) and all(isinstance(m, str) for m in mask)


def _is_mask_leaf(x: Any) -> bool:
    return x is None or _walk.is_row_sparse(x) or isinstance(x, (bool, np.bool_)) or _is_array_leaf(x)


def _is_array_leaf(x: Any) -> bool:
    return isinstance(x, (np.ndarray, jax.Array))


def check_mask(fn: str, mask: Any, arg: str = "mask") -> None:
    """Refuse at construction what cannot be a mask: None, a string, a number, a non-bool array.

    Raises:
      TypeError: naming `fn`, `arg`, the value and what a mask may be.
    """
    leaf = jax.tree_util.treedef_is_leaf(jax.tree.structure(mask, is_leaf=_walk.is_row_sparse))
    bad = mask is None or isinstance(mask, (str, bytes))
    if leaf and not bad and not callable(mask):
        bad = not isinstance(mask, (bool, np.bool_)) and not (
            _is_array_leaf(mask) and mask.shape == () and mask.dtype == bool
        )
    if bad:
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `{arg}` must be a tree of bools shaped like the params (or a "
            f"prefix of it, such as True), a function params -> such a tree, or a list of key-path "
            f"patterns, got {mask!r}."
        )


def _as_bool(fn: str, arg: str, m: Any) -> bool:
    if isinstance(m, (bool, np.bool_)):
        return bool(m)
    if _is_array_leaf(m) and m.shape == () and m.dtype == bool:
        if isinstance(m, jax.core.Tracer):
            raise TypeError(
                f"`{_checks.api_name(fn)}`: `{arg}` must be known when the step is traced (it decides "
                f"which parameters have slots), got the traced value {m!r}; pass Python or numpy bools."
            )
        return bool(m)
    raise TypeError(
        f"`{_checks.api_name(fn)}`: `{arg}` must hold a bool (Python, numpy or a 0-d bool array) per "
        f"parameter or subtree, got {m!r}."
    )


def _up_to(mask: Any, params: Any) -> tuple[list[Any], list[Any], Any] | None:
    """The mask's leaves, the params subtree under each, and the mask's treedef; None if no prefix."""
    treedef: Any  # a PyTreeDef
    leaves, treedef = jax.tree.flatten(mask, is_leaf=_is_mask_leaf)
    try:
        return leaves, treedef.flatten_up_to(params), treedef
    except (ValueError, TypeError):
        return None


def _is_leaf_tree(tree: Any) -> bool:
    return jax.tree_util.treedef_is_leaf(jax.tree.structure(tree, is_leaf=_is_mask_leaf))


def _spread(on: Any, sub: Any) -> Any:
    keep = lambda p: None if on is None or p is None else on  # noqa: E731
    return jax.tree.map(keep, sub, is_leaf=lambda x: x is None or _walk.is_row_sparse(x))


def resolve_prefix(fn_name: str, arg: str, tree: Any, params: Any, value: Callable[[Any], Any]) -> Any:
    """`tree` (or `tree(params)` for a function) spread over the params: a tree with their structure.

    Each leaf of `tree` stands for the params subtree under it (a prefix, as in optax), and
    becomes `value(leaf)` on every parameter there; a `None` leaf, or a `None` parameter, gives
    `None`. A callable whose own tree structure fits the params (an equinox Module of bools)
    is a tree, not a function.

    Raises:
      TreeMismatchError: when (the result of) `tree` is not a prefix of the params' structure.
    """
    if callable(tree) and (_is_leaf_tree(tree) or _up_to(tree, params) is None):
        tree = tree(params)
    fitted = _up_to(tree, params)
    if fitted is None:
        want = f"must match: `{arg}` must have the params' tree structure or a prefix of it"
        raise _protocol.tree_mismatch_error(fn_name, f"`{arg}`", tree, "params", params, want=want)
    leaves, subs, treedef = fitted
    values = [None if m is None else value(m) for m in leaves]
    return treedef.unflatten([_spread(v, sub) for v, sub in zip(values, subs, strict=True)])


class ShapeLabels:
    """A function of the params that reads only their shapes and dtypes (labels or a mask by the number of
    axes: MARS's and Muon's split), declared so: it is called with the whole parameters' shapes
    (`jax.ShapeDtypeStruct`s, `sliced.whole_shape`), so that it routes ZeRO's flat slices as the whole
    leaves, and a routing by it runs on slices (`SliceWise`)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, params: Any) -> Any:
        def whole(path: Any, p: Any) -> Any:
            if p is None:
                return None
            return jax.ShapeDtypeStruct(_sliced.whole_shape(path, p), jnp.result_type(p))

        return self.fn(jax.tree_util.tree_map_with_path(whole, params, is_leaf=lambda x: x is None))


def is_placeholder(params: Any) -> bool:
    """A node without leaves that is no container of its own: `optax.tree.map_params`'s stand-in for the
    params, which a mask is not resolved against (optax's `masked` passes it on whole)."""
    return params is not None and not isinstance(params, (dict, list, tuple)) and not jax.tree.leaves(params)


def resolve_mask(fn_name: str, mask: Any, params: Any, *, arg: str = "mask") -> Any:
    """A tree of Python bools with the structure of `params` (None where params are None).

    `mask` may be a tree of bools (Python, numpy or 0-d concrete arrays) with the structure of
    `params` or a prefix of it, a function `params -> tree`, or a list of key-path patterns
    (strings, see `path_matches`) selecting the leaves where it is True.

    Raises:
      TypeError: for a mask that is none of these or has non-bool leaves.
      TreeMismatchError: for a mask tree that is not a prefix of `params`.
    """
    if _is_patterns(mask):
        patterns = list(mask)
        hit = lambda path, _: any(path_matches(pt, path) for pt in patterns)  # noqa: E731
        return jax.tree_util.tree_map_with_path(hit, params, is_leaf=_walk.is_row_sparse)
    return resolve_prefix(fn_name, arg, mask, params, lambda m: _as_bool(fn_name, arg, m))


def select(fn_name: str, mask_tree: Any, tree: Any) -> Any:
    """`tree` with every leaf where `mask_tree` is False replaced by None (masked out)."""
    keep = lambda m, x: x if m else None  # noqa: E731
    return _walk.map_updates(fn_name, keep, mask_tree, tree, names=("mask", "updates"))


def merge(fn_name: str, mask_tree: Any, where_true: Any, where_false: Any) -> Any:
    """Leaves of `where_true` where the mask is True, of `where_false` elsewhere."""
    return _walk.map_updates(
        fn_name,
        lambda m, a, b: a if m else b,
        mask_tree,
        where_true,
        where_false,
        names=("mask", "inner updates", "updates"),
    )


def path_str(path: tuple[Any, ...]) -> str:
    """A key path as a slash-separated name: `("layer", 0, "w")` -> `"layer/0/w"`."""
    parts = []
    for key in path:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return "/".join(parts)


def path_matches(pattern: str, path: tuple[Any, ...]) -> bool:
    """True when the slash-separated `path` matches the glob `pattern` or contains it as a substring.

    `"*/kernel"` matches `"dense/kernel"`; `"bias"` matches any path containing "bias"
    (TF's `skip_list` / `gradient_multipliers` use name substrings).
    """
    name = path_str(path)
    return fnmatch.fnmatchcase(name, pattern) or pattern in name
