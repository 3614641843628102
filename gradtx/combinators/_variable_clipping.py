"""Projection of the parameters after a step: `clip_variables` (contrib's VariableClippingOptimizer)."""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import jax

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk


class ClipVariablesState(NamedTuple):
    """State of `clip_variables` when `max_norm` is a schedule."""

    count: _protocol.Count  # int32: completed updates


@_registry.transform()
def clip_variables(
    max_norm: _protocol.ScalarOrSchedule, dims: Mapping[str, Sequence[int]]
) -> _protocol.GradientTransformation:
    r"""After the step, clip the L2 norm of chosen parameters along chosen axes (a projection of the params).

    Put it last in a chain: with `w' = w + u` the new parameters before clipping,

    .. math:: u \leftarrow \mathrm{clip\_by\_norm}(w', c, \text{axes}) - w

    as `tf.contrib.opt.VariableClippingOptimizer` does after the inner `apply_gradients`.
    This clips the *variables* (e.g. each embedding row to norm <= c with axes `[1]`), not
    the gradients. A row-sparse update is projected on its rows only (contrib's sparse
    path; when the axes include 0, the whole variable, as contrib). Parameters that no key
    of `dims` names are left alone.

    Args:
      max_norm: the largest L2 norm, >= 0 (number, scalar array or schedule).
      dims: key path or pattern (``"embedding"``, ``"*/kernel"``) -> the axes of the norm
        (contrib's `vars_to_clip_dims`).

    Returns:
      A `GradientTransformation` (state `EmptyState()`, or `ClipVariablesState(count)` for a schedule).

    Raises:
      TypeError: for `dims` that is not a dict of axis lists.
      ValueError: for a negative `max_norm`; at `init`, for a key matching no parameter or
        an axis out of range; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.sgd(1.0), gradtx.clip_variables(1.0, {"emb": [1]}))
        >>> params = {"emb": jnp.array([[0.0, 0.0], [0.6, 0.0]])}
        >>> u, _ = tx.update({"emb": jnp.array([[-3.0, -4.0], [0.0, 0.0]])}, tx.init(params), params)
        >>> gradtx.apply_updates(params, u)["emb"]  # row 0 projected to norm 1, row 1 untouched
        Array([[0.6, 0.8],
               [0.6, 0. ]], dtype=float32)

    References:
      TensorFlow, `tf.contrib.opt.VariableClippingOptimizer`.
    """
    fn = "clip_variables"
    _checks.check_nonnegative(fn, "max_norm", max_norm)
    if (
        not isinstance(dims, Mapping)
        or not dims
        or not all(
            isinstance(k, str) and isinstance(v, (list, tuple)) and all(isinstance(a, int) for a in v)
            for k, v in dims.items()
        )
    ):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `dims` must be a non-empty dict key path -> list of axes, "
            f"got {dims!r}."
        )
    scheduled = _hyper.any_schedule(max_norm)

    def axes_of(params) -> list[Any]:
        flat = jax.tree_util.tree_flatten_with_path(
            params, is_leaf=lambda x: x is None or _walk.is_row_sparse(x)
        )[0]
        out, used = [], set()
        for path, p in flat:
            hits = [] if p is None else [k for k in dims if _masks.path_matches(k, path)]
            if len(hits) > 1:
                raise ValueError(
                    f"`{_checks.api_name(fn)}`: the parameter {_masks.path_str(path)!r} is matched by "
                    f"several keys: {hits}."
                )
            if hits and any(not -len(p.shape) <= a < len(p.shape) for a in dims[hits[0]]):
                raise ValueError(
                    f"`{_checks.api_name(fn)}`: axes {list(dims[hits[0]])} are out of range for "
                    f"{_masks.path_str(path)!r} of shape {tuple(p.shape)}."
                )
            if hits and _walk.is_integer(p):
                raise TypeError(
                    f"`{_checks.api_name(fn)}`: the parameter {_masks.path_str(path)!r} is {p.dtype}; its "
                    "projection onto a norm ball is fractional and would be rounded away. Clip "
                    "floating-point parameters only."
                )
            used.update(hits)
            out.append(tuple(a % len(p.shape) for a in dims[hits[0]]) if hits else None)
        if set(dims) - used and flat:  # (no leaves at all: a placeholder, as optax.tree.map_params passes)
            raise ValueError(
                f"`{_checks.api_name(fn)}`: the keys {sorted(set(dims) - used)} match no parameter."
            )
        return out

    def init_fn(params):
        axes_of(params)
        return ClipVariablesState(_hyper.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise _protocol.missing_params(fn)
        c_ = _hyper.resolve(max_norm, state.count if scheduled else None)
        leaves, (flat_p,), treedef = _walk.flatten_updates(fn, updates, params, names=("updates", "params"))

        def project(u, p, axes):
            if u is None or axes is None:
                return u
            c = _hyper.like(c_, p)
            if _walk.is_row_sparse(u) and 0 not in axes:
                u = u.deduplicated()
                rows = u.gather(p)
                moved = rows + u.values.astype(p.dtype)
                return u.with_values(u.zero_padding(_formulas.clip_to_norm(moved, c, axes) - rows))
            dense = u.todense() if _walk.is_row_sparse(u) else u
            moved = p + dense.astype(p.dtype)
            return (_formulas.clip_to_norm(moved, c, axes) - p).astype(dense.dtype)

        out = treedef.unflatten(
            [project(u, p, a) for u, p, a in zip(leaves, flat_p, axes_of(params), strict=True)]
        )
        return out, (ClipVariablesState(_hyper.increment(state.count)) if scheduled else state)

    return _protocol.GradientTransformation(init_fn, update_fn)
