"""optax's routing and small wrappers with optax's signatures and state layouts, gradtx's rules inside.

`partition` / `multi_transform` route each label's parameters through optax's `masked` (so a
label's state is `MaskedState(inner_state)` with `MaskedNode()` for the other labels'
parameters, node for node optax's), `freeze` and `selective_transform` are optax's
compositions of them, the conditional wrappers keep optax's state classes (the count named
`step`), and the state names optax exports for stateless transforms are `EmptyState`. No math
here: each name is a composition or a gradtx rule under optax's names.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

import gradtx
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import _conditional
from gradtx.optax_compat import _masked

AdaptiveGradClipState = _protocol.EmptyState
AddDecayedWeightsState = _protocol.EmptyState
ClipState = _protocol.EmptyState
ClipByGlobalNormState = _protocol.EmptyState
NonNegativeParamsState = _protocol.EmptyState
ScaleState = _protocol.EmptyState
ScaleByTrustRatioState = _protocol.EmptyState


class PartitionState(NamedTuple):
    """State of `partition`: each label's `MaskedState`, by label (optax's `PartitionState`)."""

    inner_states: Mapping[Hashable, Any]


MultiTransformState = PartitionState


class ConditionallyTransformState(NamedTuple):
    """State of `conditionally_transform` (optax's layout): the inner state, then the calls so far."""

    inner_state: Any
    step: _protocol.Count


class ConditionallyMaskState(NamedTuple):
    """State of `conditionally_mask` (optax's layout): the calls so far, then the inner state."""

    step: _protocol.Count
    inner_state: Any


def _labels_of(param_labels: Any, tree: Any) -> Any:
    return param_labels(tree) if callable(param_labels) else param_labels


@_factory.api
def partition(
    transforms: Mapping[Hashable, Any],
    param_labels: Any | Callable[[Any], Any],
    *,
    mask_compatible_extra_args: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `partition`: each label's transform on the parameters of that label, optax's state layout.

    Every label's transform is optax's `masked(tx, labels == label)`, so its state is a
    `MaskedState` holding `MaskedNode()` for the other labels' parameters. `gradtx.partition`
    routes the same way with gradtx's layout (each transform sees its own parameters only).

    Args:
      transforms: `{label: transform}`.
      param_labels: a tree of labels with the params' structure (or a prefix of it), or a
        function `params -> labels` (called on the params at `init`, the updates at `update`).
      mask_compatible_extra_args: whether extra arguments shaped like the updates are masked
        as the updates are (optax's `masked`).

    Returns:
      A transform with state `PartitionState(inner_states)`.

    Raises:
      TypeError: for a transform that is not one, or labels that are None.
      ValueError: at `init`, for a label with no transform.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.partition({"a": optax.sgd(1.0), "f": optax.set_to_zero()}, {"w": "a", "b": "f"})
        >>> g = {"w": jnp.ones(2), "b": jnp.ones(2)}
        >>> u, _ = tx.update(g, tx.init(g))
        >>> u["w"].tolist(), u["b"].tolist()
        ([-1.0, -1.0], [0.0, 0.0])
    """
    fn = "partition"
    if not isinstance(transforms, Mapping) or not transforms:
        raise TypeError(
            f"`{fn}`: `transforms` must be a non-empty mapping of labels to transforms, got {transforms!r}."
        )
    for label, tx in transforms.items():
        _checks.check_transform(fn, f"transforms[{label!r}]", tx)
    if param_labels is None:
        raise TypeError(
            f"`{fn}`: `param_labels` must be a tree of labels or a function of the params, got None."
        )
    _checks.check_bool(fn, "mask_compatible_extra_args", mask_compatible_extra_args)

    def masked(labels, label, tx):
        mask = jax.tree.map(lambda x: x == label, labels)
        return _masked.masked(tx, mask, mask_compatible_extra_args=mask_compatible_extra_args)

    def init_fn(params):
        labels = _labels_of(param_labels, params)
        missing = sorted(map(repr, set(jax.tree.leaves(labels)) - set(transforms)))
        if missing:
            raise ValueError(
                f"`{fn}`: some parameters have no transform: labels {', '.join(missing)} are not among "
                f"the keys of `transforms` ({', '.join(sorted(map(repr, transforms)))})."
            )
        return PartitionState({k: masked(labels, k, tx).init(params) for k, tx in transforms.items()})

    def update_fn(updates, state, params=None, **extra_args):
        labels = _labels_of(param_labels, updates)
        new = {}
        for label, tx in transforms.items():
            updates, new[label] = masked(labels, label, tx).update(
                updates, state.inner_states[label], params, **extra_args
            )
        return updates, PartitionState(new)

    return _factory.composite(init_fn, update_fn, *(_factory.member(tx) for tx in transforms.values()))


@_factory.api
def multi_transform(
    transforms: Mapping[Hashable, Any],
    param_labels: Any | Callable[[Any], Any],
    *,
    mask_compatible_extra_args: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `multi_transform`, its former name of `partition` (the same transform and state).

    Args:
      transforms: `{label: transform}`.
      param_labels: a tree of labels, or a function `params -> labels`.
      mask_compatible_extra_args: as in `partition`.

    Returns:
      `partition(transforms, param_labels, ...)`.

    Raises:
      TypeError / ValueError: as `partition`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.multi_transform({"a": optax.sgd(1.0)}, {"w": "a"})
        >>> type(tx.init({"w": jnp.ones(1)})).__name__
        'PartitionState'
    """
    return partition(transforms, param_labels, mask_compatible_extra_args=mask_compatible_extra_args)


@_factory.api
def freeze(mask: Any) -> _protocol.GradientTransformation:
    """optax's `freeze`: zero the updates where `mask` is True (`masked(set_to_zero(), mask)`).

    Args:
      mask: True for the parameters to freeze: a tree of bools (or a prefix), or a bool.

    Returns:
      A transform with state `MaskedState(EmptyState())`.

    Raises:
      TypeError: for a bad mask.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.freeze({"w": True, "b": False})
        >>> g = {"w": jnp.ones(1), "b": jnp.ones(1)}
        >>> tx.update(g, tx.init(g))[0]
        {'b': Array([1.], dtype=float32), 'w': Array([0.], dtype=float32)}
    """
    return _masked.masked(gradtx.set_to_zero(), mask)


@_factory.api
def selective_transform(optimizer: Any, *, freeze_mask: Any) -> _protocol.GradientTransformation:
    """optax's `selective_transform`: `optimizer` where `freeze_mask` is False, zero updates where True.

    Args:
      optimizer: the transform for the trained parameters.
      freeze_mask: a static tree of bools (True: frozen) with the params' structure.

    Returns:
      ``partition({"train": optimizer, "freeze": set_to_zero()}, labels)``, optax's composition.

    Raises:
      TypeError: for a bad `optimizer`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.selective_transform(optax.sgd(1.0), freeze_mask={"w": False, "b": True})
        >>> g = {"w": jnp.ones(1), "b": jnp.ones(1)}
        >>> tx.update(g, tx.init(g))[0]
        {'b': Array([0.], dtype=float32), 'w': Array([-1.], dtype=float32)}
    """
    labels = jax.tree.map(lambda frozen: "freeze" if frozen else "train", freeze_mask)
    return partition({"train": optimizer, "freeze": gradtx.set_to_zero()}, lambda _: labels)


@_factory.api
def conditionally_transform(
    inner: Any, should_transform_fn: Callable[..., Any], forward_extra_args: bool = False
) -> _protocol.GradientTransformation:
    """optax's `conditionally_transform`: `gradtx.conditionally_transform` with optax's state class.

    Args:
      inner: the transform to apply at the selected steps.
      should_transform_fn: `step -> bool scalar` (with `forward_extra_args`, the extra
        arguments of `update` too).
      forward_extra_args: whether `should_transform_fn` is given the extra arguments.

    Returns:
      A transform with state `ConditionallyTransformState(inner_state, step)`.

    Raises:
      TypeError: for a bad `inner` or `should_transform_fn`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.conditionally_transform(optax.scale(10.0), lambda step: step % 2 == 0)
        >>> tx.update(jnp.ones(1), tx.init(jnp.ones(1)))[0]
        Array([10.], dtype=float32)
    """
    return _conditional._conditional(
        "conditionally_transform",
        inner,
        should_transform_fn,
        forward_extra_args,
        lambda updates: updates,
        ConditionallyTransformState,
        count_field="step",
    )


@_factory.api
def conditionally_mask(
    inner: Any, should_transform_fn: Callable[..., Any], forward_extra_args: bool = False
) -> _protocol.GradientTransformation:
    """optax's `conditionally_mask`: `gradtx.conditionally_mask` with optax's state class.

    Args:
      inner: the transform to apply at the selected steps (zero updates elsewhere).
      should_transform_fn: `step -> bool scalar` (with `forward_extra_args`, the extra
        arguments of `update` too).
      forward_extra_args: whether `should_transform_fn` is given the extra arguments.

    Returns:
      A transform with state `ConditionallyMaskState(step, inner_state)`.

    Raises:
      TypeError: for a bad `inner` or `should_transform_fn`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.conditionally_mask(optax.sgd(1.0), lambda step: step >= 1)
        >>> tx.update(jnp.ones(1), tx.init(jnp.ones(1)))[0]
        Array([0.], dtype=float32)
    """
    return _conditional._conditional(
        "conditionally_mask",
        inner,
        should_transform_fn,
        forward_extra_args,
        lambda updates: jax.tree.map(jax.numpy.zeros_like, updates),
        ConditionallyMaskState,
        count_field="step",
    )


@_factory.api
def stateless_with_tree_map(f: Callable[[Any, Any], Any]) -> _protocol.GradientTransformation:
    """optax's `stateless_with_tree_map`: `f(update, param)` on every leaf, no state.

    Args:
      f: `(update, param or None) -> new update`, for one array.

    Returns:
      A transform with state `EmptyState()`.

    Raises:
      TypeError: for an `f` that is not callable.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.stateless_with_tree_map(lambda u, p: 2 * u)
        >>> tx.update(jnp.ones(2), tx.init(jnp.ones(2)))[0]
        Array([2., 2.], dtype=float32)
    """
    _checks.check_callable("stateless_with_tree_map", "f", f)

    def update(updates, params):
        if params is None:
            return jax.tree.map(lambda u: f(u, None), updates)
        return jax.tree.map(f, updates, params)

    return gradtx.stateless(update)


def init_empty_state(params: Any) -> _protocol.EmptyState:
    """optax's `init_empty_state`: the `init` of a stateless transform, `EmptyState()` for any params.

    Args:
      params: any parameters (not read).

    Returns:
      `EmptyState()`.

    Example:
        >>> from gradtx import optax_compat as optax
        >>> optax.init_empty_state({"w": 1.0})
        EmptyState()
    """
    del params
    return _protocol.EmptyState()


@_factory.api
def flatten(inner: Any) -> _protocol.GradientTransformation:
    """optax's `flatten`: `inner` on one vector, every leaf raveled and concatenated (optax's layout).

    The state is `inner`'s state for that vector, as optax's. `gradtx.packing.packed(tx)`
    keeps a state of a few buffers too, grouped by dtype and sharding, which a sharded model
    needs (one concatenation across shardings moves data).

    Args:
      inner: the transform to run on the flat vector.

    Returns:
      A transform with `inner`'s state for the concatenated parameters.

    Raises:
      TypeError: for an `inner` that is not a transform.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.flatten(optax.adam(0.1))
        >>> tx.init({"w": jnp.ones((2, 2)), "b": jnp.ones(3)})[0].mu.shape
        (7,)
    """
    _checks.check_transform("flatten", "inner", inner)
    inner = _factory.member(inner)

    def ravel(tree):
        return jax.numpy.concatenate([jax.numpy.reshape(x, [-1]) for x in jax.tree.leaves(tree)])

    def unravel(like, flat):
        leaves, treedef = jax.tree.flatten(like)
        ends = list(itertools.accumulate(int(np.size(x)) for x in leaves))[:-1]
        parts = jax.numpy.split(flat, ends)
        return jax.tree.unflatten(treedef, [p.reshape(x.shape) for p, x in zip(parts, leaves, strict=True)])

    def init_fn(params):
        return inner.init(ravel(params))

    def update_fn(updates, state, params=None, **extra_args):
        flat_params = None if params is None else ravel(params)
        new, state = inner.update(ravel(updates), state, flat_params, **extra_args)
        return unravel(updates, new), state

    return _protocol.LeafWise(init_fn, update_fn)
