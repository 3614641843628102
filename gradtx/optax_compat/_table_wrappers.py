"""The table of optax's wrappers and routing -> gradtx's, in optax's state layouts.

`masked` is gradtx's routing (`gradtx.combinators._masking.route`) with optax's `MaskedNode()` in place
of a masked-out parameter (or subtree), so its state is optax's tree node for node; `partition`,
`freeze` and `selective_transform` are optax's compositions of it; `lookahead` keeps the slow weights
in the params (`LookaheadParams`); the rest are gradtx's in optax's state classes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import gradtx
from gradtx import linalg, sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx._core.restated import restated
from gradtx.combinators import _conditional
from gradtx.combinators._lookahead import sync_step
from gradtx.combinators._masking import by_structure, check_partition, route
from gradtx.optax_compat._mirror import MARKERS, recipe


class MaskedNode(NamedTuple):
    """What the inner transform of `masked` sees for a masked-out parameter or subtree (optax's name).

    An empty node: tree maps pass over it, so the inner state has one where a slot is left out.
    """


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
    with gradtx's resolution of its leaves; one bool per parameter for key-path patterns. A mask is a
    function of the tree when every leaf of it is callable (optax's test)."""
    leaves = jax.tree.leaves(mask)
    raw = mask(tree) if leaves and all(callable(x) for x in leaves) else mask
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


@recipe("masked", gradtx.masked, example='masked(optax.adam(0.1), {"w": True})')
def masked(a):
    """`gradtx.masked`, the inner transform seeing `MaskedNode()` where gradtx gives it `None` (optax's
    layout: a function `mask` is called on the params at `init`, on the updates at `update`).

    Args:
      mask_compatible_extra_args: if True, an extra argument of `update` with the tree structure of
        the updates is masked as the updates are before it reaches `inner`.
    """
    if a.mask is None or jax.tree.leaves(a.mask):  # an empty container is the mask of empty params
        _masks.check_mask("masked", a.mask)
    _checks.check_transform("masked", "inner", a.inner)
    return route(
        a.inner,
        lambda updates, params: _layout(a.mask, updates),
        _hide,
        lambda layout, new, updates: jax.tree.map(lambda keep, u, g: u if keep else g, layout, new, updates),
        routing=a.mask,
        mask_extra_args=a.mask_compatible_extra_args,
    )


class PartitionState(NamedTuple):
    """State of `partition`: each label's `MaskedState`, by label (optax's `PartitionState`)."""

    inner_states: Mapping[Hashable, Any]


MultiTransformState = PartitionState


@recipe("partition", gradtx.partition, masked, example='partition({"a": optax.sgd(0.1)}, {"w": "a"})')
def partition(a):
    """each label's transform as `masked(transform, labels == label)`, in `PartitionState(inner_states)`
    (`gradtx.partition` routes alike, each transform seeing its own parameters only)."""
    fn = "partition"
    check_partition(a.transforms, a.param_labels)
    _checks.check_bool(fn, "mask_compatible_extra_args", a.mask_compatible_extra_args)

    def labels_of(tree):
        return a.param_labels(tree) if callable(a.param_labels) else a.param_labels

    def each(labels, label, tx):
        mask = jax.tree.map(lambda x: x == label, labels)
        return masked(tx, mask, mask_compatible_extra_args=a.mask_compatible_extra_args)

    def init_fn(params):
        labels = labels_of(params)
        missing = sorted(map(repr, set(jax.tree.leaves(labels)) - set(a.transforms)))
        if missing:
            raise ValueError(
                f"`{fn}`: some parameters have no transform: labels {', '.join(missing)} are not among "
                f"the keys of `transforms` ({', '.join(sorted(map(repr, a.transforms)))})."
            )
        return PartitionState({k: each(labels, k, tx).init(params) for k, tx in a.transforms.items()})

    def update_fn(updates, state, params=None, **extra_args):
        labels, new = labels_of(updates), {}
        for label, tx in a.transforms.items():
            updates, new[label] = each(labels, label, tx).update(
                updates, state.inner_states[label], params, **extra_args
            )
        return updates, PartitionState(new)

    # routed by labels, as `gradtx.partition`: never element-wise (a labels function may read shapes)
    raw = _protocol.GradientTransformation(init_fn, update_fn)
    return by_structure(raw, a.param_labels, [_factory.member(t) for t in a.transforms.values()])


@recipe("multi_transform", partition, example='multi_transform({"a": optax.sgd(0.1)}, {"w": "a"})')
def multi_transform(a):
    """optax's former name of `partition` (the same transform and state)."""
    return partition(a.transforms, a.param_labels, mask_compatible_extra_args=a.mask_compatible_extra_args)


@recipe("freeze", gradtx.freeze, example='freeze({"w": True})')
def freeze(a):
    """`masked(set_to_zero(), mask)`: zero updates where `mask` is True, state `MaskedState(EmptyState())`."""
    return masked(gradtx.set_to_zero(), a.mask)


@recipe(
    "selective_transform",
    gradtx.freeze,
    example='selective_transform(optax.sgd(0.1), freeze_mask={"w": False})',
)
def selective_transform(a):
    """`partition({"train": optimizer, "freeze": set_to_zero()}, labels)`, `freeze_mask` True where frozen.

    Args:
      optimizer: the transform for the trained parameters.
      freeze_mask: a static tree of bools (True: frozen) with the params' structure.
    """
    labels = jax.tree.map(lambda frozen: "freeze" if frozen else "train", a.freeze_mask)
    return partition({"train": a.optimizer, "freeze": gradtx.set_to_zero()}, lambda _: labels)


class ConditionallyTransformState(NamedTuple):
    """State of `conditionally_transform` (optax's layout): the inner state, then the calls so far."""

    inner_state: Any
    step: _protocol.Count


class ConditionallyMaskState(NamedTuple):
    """State of `conditionally_mask` (optax's layout): the calls so far, then the inner state."""

    step: _protocol.Count
    inner_state: Any


@recipe(
    "conditionally_transform",
    gradtx.conditionally_transform,
    example="conditionally_transform(optax.sgd(0.1), lambda step: step % 2 == 0)",
)
def conditionally_transform(a):
    """`gradtx.conditionally_transform` in `ConditionallyTransformState(inner_state, step)`."""
    return _conditional._conditional(
        "conditionally_transform",
        a.inner,
        a.should_transform_fn,
        a.forward_extra_args,
        lambda updates: updates,
        ConditionallyTransformState,
        count_field="step",
    )


@recipe(
    "conditionally_mask",
    gradtx.conditionally_mask,
    example="conditionally_mask(optax.sgd(0.1), lambda step: step >= 1)",
)
def conditionally_mask(a):
    """`gradtx.conditionally_mask` in `ConditionallyMaskState(step, inner_state)`."""
    return _conditional._conditional(
        "conditionally_mask",
        a.inner,
        a.should_transform_fn,
        a.forward_extra_args,
        lambda updates: jax.tree.map(jnp.zeros_like, updates),
        ConditionallyMaskState,
        count_field="step",
    )


@recipe("stateless_with_tree_map", example="stateless_with_tree_map(lambda u, p: 2 * u)")
def stateless_with_tree_map(a):
    """`f(update, param)` on every leaf (`param` None without params), state `EmptyState()`.

    Args:
      f: `(update, param or None) -> new update`, for one array.
    """
    _checks.check_callable("stateless_with_tree_map", "f", a.f)

    def update(updates, params):
        if params is None:
            return jax.tree.map(lambda u: a.f(u, None), updates)
        return jax.tree.map(a.f, updates, params)

    return gradtx.stateless(update)


@recipe("flatten", example="flatten(optax.adam(0.1))")
def flatten(a):
    """`inner` on one vector, every leaf raveled and concatenated, its state for that vector (optax's
    layout; `gradtx.packing.packed` also groups by dtype and sharding, which a sharded model needs).

    Args:
      inner: the transform to run on the flat vector.
    """
    _checks.check_transform("flatten", "inner", a.inner)
    inner = _factory.member(a.inner)

    def ravel(tree):
        return jnp.concatenate([jnp.reshape(x, [-1]) for x in jax.tree.leaves(tree)])

    def unravel(like, flat):
        leaves, treedef = jax.tree.flatten(like)
        ends = list(itertools.accumulate(int(np.size(x)) for x in leaves))[:-1]
        parts = jnp.split(flat, ends)
        return jax.tree.unflatten(treedef, [p.reshape(x.shape) for p, x in zip(parts, leaves, strict=True)])

    def update_fn(updates, state, params=None, **extra_args):
        new, state = inner.update(
            ravel(updates), state, None if params is None else ravel(params), **extra_args
        )
        return unravel(updates, new), state

    return _protocol.LeafWise(lambda params: inner.init(ravel(params)), update_fn)


@recipe("monitor", gradtx.monitor, example='monitor({"norm": optax.tree.norm})')
def monitor(a):
    """`gradtx.monitor`, whose `init` keeps no measurements yet (optax's state changes structure at the
    first step; gradtx's starts with zeros shaped like each measurement, one structure for a scan)."""
    tx = gradtx.monitor(a.measures)
    return _protocol.GradientTransformation(lambda p: tx.init(p)._replace(measurements={}), tx.update)


@recipe(
    "measure_with_ema", gradtx.measure_with_ema, example="measure_with_ema(optax.tree.norm, 0.9)", api=False
)
def measure_with_ema(a):
    """`gradtx.measure_with_ema` with its average in optax's `EmaState` (a measurement, not a slot: it is
    `gradtx.measure_with_ema`'s transform as it is, whose state is not shaped like the params)."""
    return gradtx.measure_with_ema(a.measure, a.decay, a.debias, a.accumulator_dtype, state=gradtx.EmaState)


class ApplyEvery(NamedTuple):
    """State of `apply_every` (optax's layout)."""

    count: Any  # int32: updates since the last emitted sum, in [0, k)
    grad_acc: Any  # their sum


@recipe("apply_every", gradtx.apply_every, example="apply_every(2)")
def apply_every(a):
    """`gradtx.apply_every(k)` in `ApplyEvery(count, grad_acc)`, whose `count` is the updates since the
    last emitted sum (gradtx's counts every update: optax's is that modulo `k`)."""
    inner = restated(gradtx.apply_every(a.k), ApplyEvery)

    def update_fn(updates, state, params=None, **extra_args):
        out, new = inner.update(updates, state, params, **extra_args)
        return out, new._replace(count=new.count % a.k)  # optax keeps the phase only

    return _factory.composite(inner.init, update_fn, inner)


class LookaheadState(NamedTuple):
    """State of `lookahead` (optax's layout)."""

    fast_state: Any  # the fast optimizer's state
    steps_since_sync: Any  # int32: fast steps since the last synchronisation, in [0, sync_period)


class LookaheadParams(NamedTuple):
    """The params of `lookahead`: the fast weights (differentiate at these) and the slow ones (evaluate)."""

    fast: Any
    slow: Any

    @classmethod
    def init_synced(cls, params: Any) -> LookaheadParams:
        """Fast and slow weights both `params`."""
        return cls(slow=params, fast=params)


@recipe("lookahead", gradtx.lookahead, example="lookahead(optax.sgd(0.1), 2, 0.5)", api=False)
def lookahead(a):
    """`gradtx.lookahead`'s synchronisation (`sync_step`) with the slow weights in the params, optax's
    `LookaheadParams(fast, slow)` (the updates too: that of `slow` is its step, 0 between
    synchronisations, so `apply_updates` moves both), the state `LookaheadState(fast_state,
    steps_since_sync)`. With `reset_state`, the fast optimizer's state is re-initialised from
    `params.fast` as given to the synchronising step (optax's; `gradtx.lookahead` initialises it at the
    synchronised weights: the same for optimizers whose initial state does not read the params).

    Args:
      fast_optimizer: the fast optimizer.
    """
    fn = "lookahead"  # no `api` checks: the params (`LookaheadParams`) are not shaped like the updates
    _checks.check_transform(fn, "fast_optimizer", a.fast_optimizer)
    _checks.check_int(fn, "sync_period", a.sync_period, minimum=1)
    _checks.check_in_range(fn, "slow_step_size", a.slow_step_size, 0.0, 1.0)
    _checks.check_bool(fn, "reset_state", a.reset_state)
    inner = _factory.member(a.fast_optimizer)

    def init_fn(params):
        fast = params.fast if isinstance(params, LookaheadParams) else params  # optax: fast weights alone too
        return LookaheadState(inner.init(fast), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        fast_updates, fast_state = inner.update(updates, state.fast_state, params.fast, **extra_args)
        sync = state.steps_since_sync == a.sync_period - 1
        pairs = jax.tree.map(
            lambda u, f, s: sync_step(u, f, s, sync, a.slow_step_size),
            sparse.densify(fast_updates),
            params.fast,
            params.slow,
        )
        fast_out, slow_out = jax.tree.transpose(
            jax.tree.structure(params.fast), jax.tree.structure((0, 0)), pairs
        )
        if a.reset_state:
            fast_state = gradtx.tree.where(sync, inner.init(params.fast), fast_state)
        steps = (state.steps_since_sync + 1) % a.sync_period
        return LookaheadParams(fast_out, slow_out), LookaheadState(fast_state, steps.astype(jnp.int32))

    return _factory.composite(init_fn, update_fn, inner)


MARKERS["<precision>"] = jax.lax.Precision.HIGHEST


@recipe(
    "matrix_inverse_pth_root",
    gradtx.linalg.matrix_inverse_pth_root,
    kind="function",
    returns="`(root, error)`, as optax's.",
    example="matrix_inverse_pth_root(jnp.eye(2), 2)",
    api=False,
)
def matrix_inverse_pth_root(a):
    """`gradtx.linalg.matrix_inverse_pth_root` with optax 0.2.8's Newton power, `2 ** round(log2(p))` of
    its iterate (a `lax.switch` over 1, 2, 4, 8): `p` for p = 1, 2, 4, 8 only, so that for another `p`
    the iteration does not converge to the p-th root (p = 3 takes 4th powers), as optax's does not."""
    _checks.check_int("matrix_inverse_pth_root", "p", a.p, minimum=1)
    power = 2 ** min(round(math.log2(a.p)), 3)  # optax's lax.switch index, clipped to its 4 branches
    args = (a.matrix, a.p, a.num_iters, a.ridge_epsilon, a.error_tolerance, a.precision)
    return linalg.inverse_pth_root(*args, power=power)


@recipe(
    "init_empty_state",
    kind="function",
    returns="`EmptyState()`.",
    example='init_empty_state({"w": 1.0})',
    api=False,
)
def init_empty_state(a):
    """the `init` of a stateless transform: `EmptyState()` for any params.

    Args:
      params: any parameters (not read).
    """
    return _protocol.EmptyState()
