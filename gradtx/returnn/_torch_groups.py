"""RETURNN-torch's parameter groups on a pytree: the weight-decay split by key path, and custom groups.

RETURNN's `Updater._get_optimizer_param_groups` splits the params of a torch module in two
groups when the optimizer takes a nonzero `weight_decay`: biases and the params of
blacklisted module types (`weight_decay_modules_blacklist`, default `torch.nn.LayerNorm` and
`torch.nn.Embedding`) get `weight_decay=0`. gradtx has key paths, not modules, so a module
type is matched against the key path of each param by name (see `is_blacklisted`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from gradtx._core import masks as _masks
from gradtx.returnn._common import ReturnnConfigError

DEFAULT_BLACKLIST = ("torch.nn.LayerNorm", "torch.nn.Embedding")
"""RETURNN's default `weight_decay_modules_blacklist`."""

_ALIASES = {"layernorm": ("ln",), "embedding": ("embed",)}
"""Other names of a module type in JAX models (after `normalise`): flax's `Embed`, GPT-2's `ln_1`."""

_FN = "from_returnn_config"


def normalise(name: str) -> str:
    """A module name or type name reduced for matching: lowercase, trailing digits, `_` and a torch
    dimension suffix (`1d`, `2d`, `3d`) removed: `LayerNorm_0`, `layer_norm_1`, `LayerNorm` -> `layernorm`;
    `BatchNorm1d`, `BatchNorm_0` -> `batchnorm`."""
    s = re.sub(r"\d+$", "", name.lower()).replace("_", "")
    return re.sub(r"[123]d$", "", s)


def _component(key: Any) -> str:
    """One key of a key path as a string (its last `/`-part: haiku's `mlp/~/layer_norm`)."""
    return _masks.path_str((key,)).rsplit("/", 1)[-1]


def blacklist_names(value: Any) -> tuple[str, ...]:
    """The normalised names of `weight_decay_modules_blacklist` (None: RETURNN's default), with aliases.

    Raises:
      ReturnnConfigError: for a value that is not a list of "torch.*" / "rf.*" strings.
    """
    if value is None:
        value = DEFAULT_BLACKLIST
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, str) for m in value):
        raise ReturnnConfigError(
            f"config `optimizer['weight_decay_modules_blacklist']`: expected a list of module type names "
            f"such as ['torch.nn.LayerNorm', 'rf.Embedding'] (a config is read, not executed: types as "
            f"strings), got {value!r}."
        )
    names: list[str] = []
    for m in value:
        if not (m.startswith("torch.") or m.startswith("rf.")):
            raise ReturnnConfigError(
                f"config `optimizer['weight_decay_modules_blacklist']`: invalid "
                f"blacklist_weight_decay_modules {value!r}: each name starts with 'torch.' or 'rf.' "
                f"(RETURNN's condition), got {m!r}."
            )
        base = normalise(m.rsplit(".", 1)[-1])
        names.append(base)
        names.extend(_ALIASES.get(base, ()))
    return tuple(names)


def is_bias(path: tuple[Any, ...]) -> bool:
    """RETURNN's `param_name.endswith("bias")` on the last key, plus haiku's bias name `b`."""
    name = _component(path[-1]) if path else ""
    return name.endswith("bias") or name == "b"


def is_blacklisted(path: tuple[Any, ...], names: Sequence[str]) -> bool:
    """Whether the module owning the param at `path` is of a blacklisted type.

    The owner is the key before the param's own name (torch's `named_parameters(recurse=False)`
    of the module); it matches when its `normalise`d name is a blacklisted type's normalised
    name or alias: flax's `LayerNorm_0`, haiku's `layer_norm` and `mlp/~/layer_norm_1`, `ln_1`
    match `LayerNorm`; flax's `Embed_0`, haiku's `embed` match `Embedding`. The namespace
    (`torch.nn.` or `rf.`) is not compared.
    """
    return len(path) >= 2 and normalise(_component(path[-2])) in names


def _flat(params: Any) -> list[tuple[tuple[Any, ...], Any]]:
    leaves = jax.tree_util.tree_flatten_with_path(params, is_leaf=lambda x: x is None)[0]
    return [(p, x) for p, x in leaves if x is not None]


def _as_bool(arg: str, value: Any, path: tuple[Any, ...]) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.ndarray, jax.Array)) and value.shape == () and value.dtype == bool:
        if not isinstance(value, jax.core.Tracer):
            return bool(value)
    raise TypeError(
        f"`{_FN}`: `{arg}` must give a Python bool for each param (known when the step is traced), got "
        f"{value!r} at {jax.tree_util.keystr(path)}."
    )


def check_mask(arg: str, mask: Any) -> None:
    """Refuse at construction what cannot be a mask (a string, a number, None)."""
    if callable(mask):
        return
    _masks.check_mask(_FN, mask, arg)


def resolve_mask(arg: str, mask: Any, params: Any) -> list[bool]:
    """`mask` for each non-None leaf of `params`, in flattening order.

    `mask` is a function `(key_path, leaf) -> bool`, a tree of bools shaped like the params
    (or a prefix of it), or a list of key-path patterns (as `gradtx.masked` takes them).
    """
    flat = _flat(params)
    if callable(mask):
        return [_as_bool(arg, mask(path, leaf), path) for path, leaf in flat]
    tree = _masks.resolve_mask(_FN, mask, params, arg=arg)
    by_path = dict(jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: x is None)[0])
    return [_as_bool(arg, by_path.get(path), path) for path, _ in flat]


def weight_decay_labels(params: Any, blacklist: Sequence[str], mask: Any) -> Any:
    """RETURNN's two groups: a tree of labels, 0 where the param gets weight decay, 1 where not.

    `mask` (True: weight decay), when given, replaces RETURNN's rule (not biases, not blacklisted
    modules).
    """
    flat = _flat(params)
    if mask is not None:
        decayed = resolve_mask("weight_decay_mask", mask, params)
    else:
        decayed = [not (is_bias(path) or is_blacklisted(path, blacklist)) for path, _ in flat]
    labels = {path: 0 if d else 1 for (path, _), d in zip(flat, decayed, strict=True)}
    return jax.tree_util.tree_map_with_path(lambda p, x: None if x is None else labels[p], params)


def check_param_groups(param_groups: Any) -> list[tuple[Any, dict[str, Any]]]:
    """`param_groups` as a list of `(mask, options)`; refuses a malformed one.

    Raises:
      TypeError: for a value that is not a non-empty sequence of `(mask, dict)` pairs.
    """
    if not isinstance(param_groups, Sequence) or isinstance(param_groups, str) or not param_groups:
        raise TypeError(
            f"`{_FN}`: `param_groups` must be a non-empty sequence of (mask, options) pairs, "
            f"got {param_groups!r}."
        )
    groups = []
    for i, group in enumerate(param_groups):
        if not isinstance(group, (tuple, list)) or len(group) != 2 or not isinstance(group[1], Mapping):
            raise TypeError(
                f"`{_FN}`: `param_groups[{i}]` must be a pair (mask, options dict), e.g. "
                f"(['*/bias'], {{'weight_decay': 0.0, 'learning_rate_multiplier': 0.1}}), got {group!r}."
            )
        check_mask(f"param_groups[{i}][0]", group[0])
        groups.append((group[0], dict(group[1])))
    return groups


def group_labels(params: Any, masks: Sequence[Any]) -> Any:
    """A tree of labels (the index of the group of each param); every param in exactly one group.

    Raises:
      ReturnnConfigError: naming the key paths of a param in no group or in several.
    """
    flat = _flat(params)
    hits = [resolve_mask(f"param_groups[{i}][0]", m, params) for i, m in enumerate(masks)]
    labels: dict[tuple[Any, ...], int] = {}
    missing, several = [], []
    for j, (path, _) in enumerate(flat):
        groups = [i for i in range(len(masks)) if hits[i][j]]
        if not groups:
            missing.append(jax.tree_util.keystr(path))
        elif len(groups) > 1:
            several.append(f"{jax.tree_util.keystr(path)} (groups {groups})")
        else:
            labels[path] = groups[0]
    if missing or several:
        what = "; ".join(
            part
            for part in (
                f"in no group: {', '.join(missing)}" if missing else "",
                f"in several groups: {', '.join(several)}" if several else "",
            )
            if part
        )
        raise ReturnnConfigError(
            f"`{_FN}`: `param_groups` must put each param in exactly one group (as torch's param groups); "
            f"params {what}."
        )
    return jax.tree_util.tree_map_with_path(lambda p, x: None if x is None else labels[p], params)


def close_names(name: str, known: Sequence[str]) -> str:
    """`" (did you mean 'x'?)"` for the close names of `name` in `known`, else ""."""
    close = difflib.get_close_matches(name, list(known), n=3)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
