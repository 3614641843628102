"""`map_params`: a function over every copy of the parameter tree inside an optimizer state."""

from __future__ import annotations

from typing import Any, Callable

import jax

from gradtx._core import protocol as _protocol


class _Params:
    """Where the parameters go: a node without leaves that is no container (every `init` keeps it whole).

    `init(_Params())` gives the state's layout with this node at each place the state keeps
    a tree shaped like the parameters (`gradtx.optax_compat.masked` keeps it whole too).
    """


jax.tree_util.register_pytree_node(_Params, lambda p: ((), None), lambda aux, children: _Params())


def _is_params(x: Any) -> bool:
    return isinstance(x, _Params)


def map_params(
    initable: Any,
    f: Callable[..., Any],
    state: Any,
    /,
    *rest: Any,
    transform_non_params: Callable[..., Any] | None = None,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """`f` mapped over every tree in `state` that is shaped like the parameters (slots), the rest kept.

    The places are found by calling `initable` on a placeholder for the parameters: where
    the state it makes has the placeholder, `state` has a tree like the parameters, and that
    tree becomes `jax.tree.map(f, tree, *rest, is_leaf=is_leaf)`. Counters and other fields are
    kept, or mapped by `transform_non_params`. The usual use: sharding specs for a state from
    the parameters' specs (`lambda _, spec: spec` with the specs in `rest`).

    Args:
      initable: the transform (anything with `init`) or an `init` function, that made `state`.
      f: the function applied leaf by leaf to each parameter-shaped tree (and `rest`).
      state: the state.
      *rest: trees shaped like the parameters, passed to `f` after each leaf.
      transform_non_params: a function applied to every other leaf of `state`, or None to
        keep them.
      is_leaf: passed to `jax.tree.map` over each parameter-shaped tree (e.g. to take
        `optax_compat.MaskedNode` whole).

    Returns:
      A tree with the structure of `state`.

    Raises:
      TreeMismatchError: when `state` is not a state `initable` makes (naming the paths that differ).

    Example:
        >>> import jax.numpy as jnp, gradtx, gradtx.optax_compat as optax
        >>> tx = optax.adam(0.1)
        >>> state = gradtx.tree.map_params(tx, lambda v: v + 1, tx.init({"w": jnp.zeros(2)}))
        >>> state[0].mu, state[0].count
        ({'w': Array([1., 1.], dtype=float32)}, Array(0, dtype=int32))
    """
    init = initable.init if hasattr(initable, "init") else initable
    layout = init(_Params())
    treedef: Any = jax.tree.structure(layout, is_leaf=_is_params)
    try:
        treedef.flatten_up_to(state)
    except (ValueError, TypeError):
        raise _protocol.tree_mismatch_error(
            "gradtx.tree.map_params",
            "the state `initable` makes",
            layout,
            "state",
            state,
            want="must have the same layout (pass the transform that made the state)",
        ) from None

    def one(where: Any, value: Any) -> Any:
        if _is_params(where):
            return jax.tree.map(f, value, *rest, is_leaf=is_leaf)
        return value if transform_non_params is None else transform_non_params(value)

    return jax.tree.map(one, layout, state, is_leaf=_is_params)
