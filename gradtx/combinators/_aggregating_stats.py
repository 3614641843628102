"""The running statistics behind `gradtx.combinators._aggregating`: means over microbatches, variances.

`accumulate_avg_updates` (the mean of `k` updates), the per-element mean and sum of squared
deviations of `get_per_element_mean_and_sum_sq_diff_grads` (built here, wrapped as an
`Aggregator` there), their EMA (`track_per_element_mean_and_variance_with_ema`) and its
bias-corrected read-out. optax's `optax.experimental.aggregating`, state for state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import tree
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx.combinators._stateless import identity

__all__ = [
    "AccumulateAvgUpdatesState",
    "PerElementMeanAndSumSqDiffGradsState",
    "PerElementMeanAndVarianceEMAState",
    "accumulate_avg_updates",
    "get_batch_size_from_per_elt_updates",
    "get_unbiased_mean_and_variance_ema",
    "track_per_element_mean_and_variance_with_ema",
]


def check_axis(fn: str, per_elt_axis: Any) -> Any:
    """`per_elt_axis` as `jnp.mean` takes it: an int, or a tuple of ints for a sequence of them."""
    if isinstance(per_elt_axis, int) and not isinstance(per_elt_axis, bool):
        return per_elt_axis
    if isinstance(per_elt_axis, Sequence) and all(
        isinstance(a, int) and not isinstance(a, bool) for a in per_elt_axis
    ):
        return tuple(per_elt_axis)
    raise TypeError(
        f"`{fn}`: `per_elt_axis` must be an int or a sequence of ints (the per-element axes of every "
        f"leaf), got {per_elt_axis!r}."
    )


class AccumulateAvgUpdatesState(NamedTuple):
    """State of `accumulate_avg_updates` (optax's, field for field)."""

    micro_step: jax.Array  # int32: updates averaged since the last emitted mean, in [0, accumulation_steps)
    ready: jax.Array  # bool: whether the last update emitted the mean
    avg_grad: _protocol.Updates  # their mean (zeros once emitted)


def accumulate_avg_updates(accumulation_steps: int) -> _protocol.GradientTransformation:
    r"""Average the updates of `accumulation_steps` microbatches; emit the mean at the last, zeros before.

    .. math:: \bar g_k = \bar g_{k-1} + (g_k - \bar g_{k-1}) / k, \qquad k = 1, \dots, K

    `optax.experimental.aggregating.accumulate_avg_updates`: the mean is kept incrementally,
    and `ready` in the state says when it was emitted, so that `process` runs its
    postprocessor on those steps only (an effective batch of `K` microbatches).

    Args:
      accumulation_steps: :math:`K`, the number of microbatches averaged (an int >= 1; 1 is
        `identity()`, with no state).

    Returns:
      An `ElementWise` transform with state `AccumulateAvgUpdatesState(micro_step, ready, avg_grad)`.

    Raises:
      TypeError: for a non-int `accumulation_steps`.
      ValueError: for `accumulation_steps < 1`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.combinators._aggregating import accumulate_avg_updates
        >>> tx = accumulate_avg_updates(2)
        >>> state = tx.init(jnp.zeros(2))
        >>> u1, state = tx.update(jnp.array([1.0, 2.0]), state)
        >>> u2, state = tx.update(jnp.array([3.0, 6.0]), state)
        >>> u1, u2, bool(state.ready)
        (Array([0., 0.], dtype=float32), Array([2., 4.], dtype=float32), True)
    """
    _checks.check_int("accumulate_avg_updates", "accumulation_steps", accumulation_steps, minimum=1)
    if accumulation_steps == 1:
        return identity()

    def init_fn(params):
        return AccumulateAvgUpdatesState(jnp.asarray(0), jnp.asarray(False), tree.zeros_like(params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        step = state.micro_step + 1
        mean = jax.tree.map(lambda g, a: a + (g - a) / step, updates, state.avg_grad)
        emit = (mean, AccumulateAvgUpdatesState(jnp.asarray(0), jnp.asarray(True), tree.zeros_like(mean)))
        wait = (tree.zeros_like(mean), AccumulateAvgUpdatesState(step, jnp.asarray(False), mean))
        return tree.where(step == accumulation_steps, emit, wait)

    return _protocol.ElementWise(init_fn, update_fn)


def _batch_size(fn: str, per_elt: Any, axes: Any) -> int:
    """The size of the per-element axes `axes` (their product), the same for every leaf of `per_elt`."""
    found = jax.tree_util.tree_leaves_with_path(per_elt)
    if not found:
        raise ValueError(f"`{fn}`: the per-element updates have no leaves; pass per-element gradients.")
    sizes = [
        x.shape[axes] if isinstance(axes, int) else math.prod(x.shape[a] for a in axes) for _, x in found
    ]
    if any(s != sizes[0] for s in sizes):
        paths = [jax.tree_util.keystr(p) or "<root>" for p, _ in found]
        listed = ", ".join(f"{s} at {p}" for p, s in zip(paths, sizes, strict=True))
        raise ValueError(
            f"`{fn}`: every leaf of the per-element updates must have the same batch size along "
            f"`per_elt_axis`={axes!r}; got {listed}."
        )
    return sizes[0]


def get_batch_size_from_per_elt_updates(per_elt_updates: Any, per_elt_axis: int | list[int]) -> int:
    """The number of elements (examples) in per-element updates: the size of their `per_elt_axis`.

    Args:
      per_elt_updates: per-element updates, every leaf with the per-element axes `per_elt_axis`.
      per_elt_axis: the per-element axis, or a list of them (their sizes multiply).

    Returns:
      The batch size, a Python int.

    Raises:
      TypeError: if `per_elt_axis` is neither an int nor a sequence of ints.
      ValueError: if the tree has no leaves, or its leaves' batch sizes differ (naming them).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.combinators._aggregating import get_batch_size_from_per_elt_updates
        >>> get_batch_size_from_per_elt_updates({"w": jnp.zeros((4, 3)), "b": jnp.zeros((4,))}, 0)
        4
    """
    fn = "get_batch_size_from_per_elt_updates"
    return _batch_size(fn, per_elt_updates, check_axis(fn, per_elt_axis))


class PerElementMeanAndSumSqDiffGradsState(NamedTuple):
    """State of `get_per_element_mean_and_sum_sq_diff_grads` with accumulation (optax's, field for field)."""

    micro_step: jax.Array  # int32: microbatches seen since the last emitted statistics
    ready: jax.Array  # bool: whether the last update emitted them
    mean_grads: _protocol.Updates  # the mean of their per-element updates
    sum_sq_diff_grads: _protocol.Updates  # the sum of squared deviations from that mean


def _batch_stats(fn: str, per_elt: Any, axes: Any) -> tuple[int, Any, Any]:
    """`(batch size, mean, sum of squared deviations from the mean)` over the per-element axes."""
    size = _batch_size(fn, per_elt, axes)
    kept = jax.tree.map(lambda x: jnp.mean(x, axis=axes, keepdims=True), per_elt)
    sq_diff = jax.tree.map(lambda x, a: jnp.sum(jnp.square(x - a), axis=axes), per_elt, kept)
    return size, jax.tree.map(lambda a: a.squeeze(axis=axes), kept), sq_diff


def mean_and_sum_sq_diff(per_elt_axis: Any, accumulation_steps: int) -> tuple[Callable, Callable]:
    """`(init, update)` of `get_per_element_mean_and_sum_sq_diff_grads` (which wraps them as an `Aggregator`).

    With accumulation, the microbatches' statistics merge as Chan, Golub and LeVeque's
    pairwise update: :math:`S \\leftarrow S + S_b + \\delta^2 \\, k B / (k + 1)`.
    """
    fn = "get_per_element_mean_and_sum_sq_diff_grads"
    axes = check_axis(fn, per_elt_axis)
    _checks.check_int(fn, "accumulation_steps", accumulation_steps, minimum=1)

    if accumulation_steps == 1:

        def init_one(params):
            del params
            return _protocol.EmptyState()

        def update_one(per_elt_updates, state, params=None, **extra_args):
            del params, extra_args
            size, mean, sq_diff = _batch_stats(fn, per_elt_updates, axes)
            return (mean, {"sum_sq_diff_grads": sq_diff, "sample_size": size}), state

        return init_one, update_one

    def init_fn(params):
        zeros = tree.zeros_like(params)
        return PerElementMeanAndSumSqDiffGradsState(
            jnp.asarray(0, jnp.int32), jnp.asarray(False), zeros, zeros
        )

    def update_fn(per_elt_updates, state, params=None, **extra_args):
        del params, extra_args
        size, batch_mean, batch_sq_diff = _batch_stats(fn, per_elt_updates, axes)
        step = state.micro_step + 1
        delta = jax.tree.map(lambda b, a: b - a, batch_mean, state.mean_grads)
        mean = jax.tree.map(lambda a, d: a + d / step, state.mean_grads, delta)
        weight = state.micro_step * size / step
        sq_diff = jax.tree.map(
            lambda s, b, d: s + b + d**2 * weight, state.sum_sq_diff_grads, batch_sq_diff, delta
        )
        out = (mean, {"sum_sq_diff_grads": sq_diff, "sample_size": size * step})
        zero = jnp.asarray(0, jnp.int32)
        emit = (
            out,
            PerElementMeanAndSumSqDiffGradsState(zero, jnp.asarray(True), *tree.zeros_like((mean, sq_diff))),
        )
        wait = (
            tree.zeros_like(out),
            PerElementMeanAndSumSqDiffGradsState(step, jnp.asarray(False), mean, sq_diff),
        )
        return tree.where(step == accumulation_steps, emit, wait)

    return init_fn, update_fn


class PerElementMeanAndVarianceEMAState(NamedTuple):
    """State of `track_per_element_mean_and_variance_with_ema` (optax's, field for field)."""

    count: _protocol.Count  # int32: completed updates, saturating
    ema_decay: jax.Array  # the decay, as given
    mean_grads_ema: _protocol.Updates  # EMA of the mean gradient (not bias-corrected)
    variance_grads_ema: _protocol.Updates  # EMA of the per-element variance (not bias-corrected)


def track_per_element_mean_and_variance_with_ema(
    ema_decay: jax.typing.ArrayLike = 0.9,
) -> _protocol.GradientTransformation:
    r"""Keep EMAs of the mean gradient and of the per-element variance; the updates pass unchanged.

    .. math::
        m_t = (1 - \beta)\, \bar g_t + \beta\, m_{t-1}, \qquad
        v_t = (1 - \beta)\, \frac{S_t}{N_t - 1} + \beta\, v_{t-1}

    `optax.experimental.aggregating.track_per_element_mean_and_variance_with_ema`: the
    updates are the mean :math:`\bar g_t`; :math:`S_t` and :math:`N_t` come as the extra
    arguments `sum_sq_diff_grads` and `sample_size`, which `process` passes on from
    `get_per_element_mean_and_sum_sq_diff_grads` (see `add_mean_variance_to_opt`).
    `get_unbiased_mean_and_variance_ema` reads the bias-corrected EMAs.

    Args:
      ema_decay: :math:`\beta`, the decay of the EMAs, in [0, 1).

    Returns:
      A `GradientTransformation` with state `PerElementMeanAndVarianceEMAState(count,
      ema_decay, mean_grads_ema, variance_grads_ema)`; its `update` needs the extra arguments
      `sum_sq_diff_grads` and `sample_size`.

    Raises:
      TypeError: for a non-number `ema_decay`; at update time, without the extra arguments.
      ValueError: for `ema_decay` outside [0, 1).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.combinators import _aggregating as aggregating
        >>> tx = aggregating.track_per_element_mean_and_variance_with_ema(ema_decay=0.5)
        >>> state = tx.init(jnp.zeros(1))
        >>> _, state = tx.update(jnp.ones(1), state, sum_sq_diff_grads=jnp.array([6.0]), sample_size=4)
        >>> state.mean_grads_ema, state.variance_grads_ema
        (Array([0.5], dtype=float32), Array([1.], dtype=float32))
    """
    fn = "track_per_element_mean_and_variance_with_ema"
    _checks.check_number(fn, "ema_decay", ema_decay)
    _checks.check_in_range(fn, "ema_decay", ema_decay, 0.0, 1.0, high_open=True)

    def ema(new: Any, old: Any) -> Any:
        return jax.tree.map(lambda x, m: _formulas.optax_moment(m, x, ema_decay), new, old)

    def init_fn(params):
        zeros = tree.zeros_like(params)
        return PerElementMeanAndVarianceEMAState(_hyper.zero_count(), jnp.asarray(ema_decay), zeros, zeros)

    def update_fn(updates, state, params=None, *, sum_sq_diff_grads=None, sample_size=None, **extra_args):
        del params, extra_args
        if sum_sq_diff_grads is None or sample_size is None:
            raise _protocol.MissingExtraArgError(
                f"`{fn}`: `update` needs the extra arguments `sum_sq_diff_grads` and `sample_size` (the "
                "per-element statistics of the batch); run it after the aggregator in `process(identity(), "
                "get_per_element_mean_and_sum_sq_diff_grads(), chain(this, opt), aggregator_has_aux=True)` "
                "(`add_mean_variance_to_opt` builds that), or call it as "
                "`tx.update(mean_grads, state, params, sum_sq_diff_grads=..., sample_size=...)`."
            )
        variance = tree.scale(1 / (sample_size - 1), sum_sq_diff_grads)
        return updates, state._replace(
            count=_hyper.increment(state.count),
            mean_grads_ema=ema(updates, state.mean_grads_ema),
            variance_grads_ema=ema(variance, state.variance_grads_ema),
        )

    return _protocol.GradientTransformation(init_fn, update_fn)


def get_unbiased_mean_and_variance_ema(state: Any) -> tuple[Any, Any]:
    r"""The bias-corrected EMAs of the mean gradient and the variance: :math:`m_t / (1 - \beta^t)`.

    Args:
      state: an optimizer state holding one `PerElementMeanAndVarianceEMAState` (the state of
        `add_mean_variance_to_opt`, for one).

    Returns:
      `(mean, variance)`, two trees shaped like the params.

    Raises:
      ValueError: if `state` holds no `PerElementMeanAndVarianceEMAState`.
      KeyError: if it holds several.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.combinators import _aggregating as aggregating
        >>> tx = aggregating.track_per_element_mean_and_variance_with_ema(ema_decay=0.5)
        >>> stats = {"sum_sq_diff_grads": jnp.array([6.0]), "sample_size": 4}
        >>> _, state = tx.update(jnp.ones(1), tx.init(jnp.zeros(1)), **stats)
        >>> aggregating.get_unbiased_mean_and_variance_ema(state)
        (Array([1.], dtype=float32), Array([2.], dtype=float32))
    """
    found = tree.get(state, "PerElementMeanAndVarianceEMAState", None)
    if found is None:
        raise ValueError(
            "`get_unbiased_mean_and_variance_ema`: `state` holds no PerElementMeanAndVarianceEMAState; pass "
            "the state of `add_mean_variance_to_opt` (or of a transform that contains "
            "`track_per_element_mean_and_variance_with_ema`)."
        )
    correction = 1 - found.ema_decay**found.count
    return (
        jax.tree.map(lambda x: x / correction, found.mean_grads_ema),
        jax.tree.map(lambda x: x / correction, found.variance_grads_ema),
    )
