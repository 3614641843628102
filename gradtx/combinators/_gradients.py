"""optimize_loss's gradient processing: `transform_gradients`, `add_noise`, `scale_gradients`."""

from __future__ import annotations

import zlib
from typing import Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import packing
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core import walk as _walk


@_registry.transform()
def transform_gradients(
    fn: Callable[[_protocol.Updates, _protocol.Params | None], _protocol.Updates],
) -> _protocol.GradientTransformation:
    """Any function of the gradients as a transform: optimize_loss's callable `clip_gradients`.

    TF's callable takes a list of `(gradient, variable)` pairs; here it takes the two
    trees, `fn(grads, params) -> grads` (`params` may be None when the caller passes none).

    Args:
      fn: the function; it must return a tree with the structure of `grads`.

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Raises:
      TypeError: if `fn` is not callable.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.transform_gradients(lambda g, p: jax.tree.map(lambda x: jnp.clip(x, -1, 1), g))
        >>> tx.update(jnp.array([-5.0, 0.5]), tx.init(None))[0]
        Array([-1. ,  0.5], dtype=float32)
    """
    _checks.check_callable("transform_gradients", "fn", fn)

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        out = fn(updates, params)
        _walk.flatten_updates("transform_gradients", updates, out, names=("grads", "fn(grads, params)"))
        return out, state

    return _protocol.GradientTransformation(init_fn, update_fn)


class AddNoiseState(NamedTuple):
    """State of `add_noise`."""

    count: _protocol.Count  # int32: completed updates (the noise of step t is drawn from fold_in(key, t - 1))
    key: jax.Array  # uint32 key data of the PRNG key made from `seed`


@_registry.transform()
@_factory.real_only("it draws real Gaussian noise")
def add_noise(
    scale: _protocol.ScalarOrSchedule, seed: int = 0, *, truncated: bool = True
) -> _protocol.GradientTransformation:
    r"""Add zero-mean Gaussian noise times `scale` to every gradient (optimize_loss's `gradient_noise_scale`).

    .. math:: g \leftarrow g + s\,\xi, \qquad \xi \sim N(0, 1) \text{ truncated to } [-2, 2]

    TF's optimize_loss draws `truncated_normal(shape) * scale` (values beyond two standard
    deviations redrawn); `truncated=False` draws a plain normal. The noise of each step is
    a pure function of `(seed, count, key path of the leaf)`, so a run is reproducible and
    a leaf's noise does not change when other parameters are added; an `update` call may
    pass its own typed PRNG key as the extra argument `key` instead. As in TF, a row-sparse gradient
    gets dense noise (the whole table: it becomes a dense gradient).

    Args:
      scale: the noise scale, >= 0 (number, scalar array or schedule).
      seed: the integer seed.
      truncated: truncate the normal at two standard deviations, as TF does.

    Returns:
      A `GradientTransformation` with state `AddNoiseState(count, key)`.

    Raises:
      TypeError: for a non-integer seed.
      ValueError: for a negative scale.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.add_noise(0.1, seed=3)
        >>> a, _ = tx.update(jnp.zeros(4), tx.init(None))
        >>> b, _ = tx.update(jnp.zeros(4), tx.init(None))
        >>> bool(jnp.all(a == b)), bool(jnp.all(jnp.abs(a) <= 0.2))
        (True, True)
    """
    fn = "add_noise"
    _checks.check_nonnegative(fn, "scale", scale)
    _checks.check_int(fn, "seed", seed, minimum=-(2**63), maximum=2**63 - 1)
    _checks.check_bool(fn, "truncated", truncated)

    def init_fn(params):
        del params
        return AddNoiseState(_hyper.zero_count(), jax.random.key_data(jax.random.key(seed)))

    def update_fn(updates, state, params=None, *, key=None, **extra_args):
        del params, extra_args
        base = (
            key if key is not None else jax.random.fold_in(jax.random.wrap_key_data(state.key), state.count)
        )
        s = _hyper.resolve(scale, state.count)
        # each leaf's noise depends on its own key path only, not on the other leaves; the leaves' keys are
        # folded in at once (one hash of a vector, where one per leaf was a kernel per leaf)
        with_paths, treedef = jax.tree_util.tree_flatten_with_path(updates, is_leaf=_is_leaf)
        salts = [zlib.crc32(_masks.path_str(path).encode()) & 0x7FFFFFFF for path, _ in with_paths]
        keys = jax.vmap(jax.random.fold_in, (None, 0))(base, np.array(salts, np.uint32)) if salts else []

        def noisy(path, g, k):
            if g is None:
                return None
            dense = g.todense() if _walk.is_row_sparse(g) else g

            def draw(shape):  # the whole leaf's noise (ZeRO's slices cut theirs from it: `_sliced`)
                if truncated:
                    return jax.random.truncated_normal(k, -2.0, 2.0, shape, jnp.float32)
                return jax.random.normal(k, shape, jnp.float32)

            noise = _sliced.leaf_part(path, dense, draw)
            return dense + (noise * _hyper.scalar(s)).astype(dense.dtype)

        out = [noisy(path, g, k) for (path, g), k in zip(with_paths, keys, strict=True)]
        return jax.tree.unflatten(treedef, out), AddNoiseState(_hyper.increment(state.count), state.key)

    # per leaf (key paths), exact on ZeRO's slices: `sharded_state` takes it inside `shard_map`
    return _protocol.SliceWise(*packing.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn)))


def _is_leaf(x: object) -> bool:
    return x is None or _walk.is_row_sparse(x)


@_registry.transform()
def scale_gradients(
    multipliers: Mapping[str, _protocol.ScalarOrSchedule],
) -> _protocol.GradientTransformation:
    """Multiply the gradients of some parameters by constants (optimize_loss's `gradient_multipliers`).

    A key is a parameter's key path written with slashes (``"dense/kernel"``), or a glob
    pattern / substring of it (``"*/bias"``, ``"embedding"``); TF keys by variable or
    variable name. Every key must match at least one parameter, and no parameter may be
    matched by two keys: both are errors (at `init`, or when `update` is traced).

    Args:
      multipliers: key -> factor (number, scalar array or schedule).

    Returns:
      A `GradientTransformation`; its state is `EmptyState()`, or `ScaleGradientsState(count)`
      when a factor is a schedule.

    Raises:
      TypeError: for a non-dict, a non-string key or a non-number factor.
      ValueError: for a key matching no parameter, or a parameter matched twice.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_gradients({"bias": 0.5})
        >>> g = {"kernel": jnp.ones(2), "bias": jnp.ones(2)}
        >>> out, _ = tx.update(g, tx.init(g), g)
        >>> out["bias"]
        Array([0.5, 0.5], dtype=float32)
    """
    fn = "scale_gradients"
    if not isinstance(multipliers, Mapping) or not multipliers:
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `multipliers` must be a non-empty dict key -> factor, "
            f"got {multipliers!r}."
        )
    for k, v in multipliers.items():
        if not isinstance(k, str):
            raise TypeError(
                f"`{_checks.api_name(fn)}`: `multipliers` keys must be key-path strings, got {k!r}."
            )
        _checks.check_hyperparam(fn, f"multipliers[{k!r}]", v)
    scheduled = _hyper.any_schedule(*multipliers.values())

    def factors(tree):
        """key -> factor for each leaf of `tree` (None where no key matches); checks the keys."""
        used, out = set(), []
        flat = jax.tree_util.tree_flatten_with_path(
            tree, is_leaf=lambda x: x is None or _walk.is_row_sparse(x)
        )[0]
        for path, leaf in flat:
            if leaf is None:
                out.append(None)
                continue
            name = _masks.path_str(path)
            hits = [k for k in multipliers if k == name] or [
                k for k in multipliers if _masks.path_matches(k, path)
            ]
            if len(hits) > 1:
                raise ValueError(
                    f"`{_checks.api_name(fn)}`: the parameter {name!r} is matched by several keys: {hits}."
                )
            used.update(hits)
            out.append(hits[0] if hits else None)
        unknown = sorted(set(multipliers) - used)
        if unknown and flat:  # (no leaves at all: a placeholder, as optax.tree.map_params passes)
            names = [_masks.path_str(p) for p, leaf in flat if leaf is not None]
            raise ValueError(
                f"`{_checks.api_name(fn)}`: the keys {unknown} match no parameter; parameters: {names}."
            )
        return out

    def init_fn(params):
        factors(params)
        return ScaleGradientsState(_hyper.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        keys = factors(params if params is not None else updates)
        count = state.count if scheduled else None
        leaves, treedef = jax.tree.flatten(updates, is_leaf=lambda x: x is None or _walk.is_row_sparse(x))
        if len(leaves) != len(keys):
            raise _protocol.tree_mismatch_error(fn, "updates", updates, "params", params)

        def scaled(g, key):
            if g is None or key is None:
                return g
            factor = _hyper.resolve(multipliers[key], count)
            if _walk.is_row_sparse(g):
                return g.with_values(g.values * _hyper.like(factor, g.values))
            return g * _hyper.like(factor, g)

        out = treedef.unflatten([scaled(g, k) for g, k in zip(leaves, keys, strict=True)])
        return out, (ScaleGradientsState(_hyper.increment(state.count)) if scheduled else state)

    return _protocol.GradientTransformation(init_fn, update_fn)


class ScaleGradientsState(NamedTuple):
    """State of `scale_gradients` when a factor is a schedule."""

    count: _protocol.Count  # int32: completed updates
