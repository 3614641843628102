"""Aggregators: from per-element (per-example) gradients to one update (`optax.experimental.aggregating`).

A usual transform takes the batch's mean gradient, shaped like the params. An `Aggregator`
takes per-element gradients, every leaf `[*batch_shape, *param_shape]`
(`jax.vmap(jax.grad(loss), in_axes=(None, 0))(params, batch)` gives them), and returns
one update shaped like the params. `process(preprocessor, aggregator, postprocessor)`
runs a transform on the per-element gradients (clip each example), the aggregator (average
them, over microbatches too), then an optimizer on the result, only on the steps where the
aggregator's state says it is `ready`. `add_mean_variance_to_opt` is one such pipeline: it
tracks the mean and the per-element variance of the gradients while training with `opt`.

optax's names, signatures, state layouts (field names and order) and numbers; the running
statistics are in `_aggregating_stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Union, cast

import jax
import jax.numpy as jnp

from gradtx import tree
from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.chain import chain
from gradtx.combinators._aggregating_stats import (
    AccumulateAvgUpdatesState,
    PerElementMeanAndSumSqDiffGradsState,
    PerElementMeanAndVarianceEMAState,
    accumulate_avg_updates,
    check_axis,
    get_batch_size_from_per_elt_updates,
    get_unbiased_mean_and_variance_ema,
    mean_and_sum_sq_diff,
    track_per_element_mean_and_variance_with_ema,
)
from gradtx.combinators._stateless import identity

__all__ = [
    "AccumulateAvgUpdatesState",
    "AggregatedUpdates",
    "Aggregator",
    "AggregatorUpdateFn",
    "MaybeAxis",
    "PerElementMeanAndSumSqDiffGradsState",
    "PerElementMeanAndVarianceEMAState",
    "PerElementUpdates",
    "accumulate_avg_updates",
    "add_mean_variance_to_opt",
    "average_incrementally_updates",
    "average_per_element_updates",
    "get_batch_size_from_per_elt_updates",
    "get_per_element_mean_and_sum_sq_diff_grads",
    "get_unbiased_mean_and_variance_ema",
    "process",
    "track_per_element_mean_and_variance_with_ema",
]

PerElementUpdates = Any
"""A pytree of per-element updates: every leaf `[*batch_shape, *param_shape]`."""
AggregatedUpdates = Any
"""A pytree of updates shaped like the params: what an `Aggregator` makes of per-element ones."""
MaybeAxis = Union[int, Sequence[int], None]
"""The per-element axis (or axes) of every leaf, or None for updates that have none."""


class AggregatorUpdateFn(Protocol):
    """The type of an aggregator's `update`: per-element updates in, one update shaped like the params out."""

    def __call__(
        self,
        per_elt_updates: PerElementUpdates,
        state: _protocol.OptState,
        params: _protocol.Params | None = None,
        **extra_args: Any,
    ) -> tuple[AggregatedUpdates, _protocol.OptState]: ...


class Aggregator(_protocol.LeafWise):
    """A `GradientTransformation` whose `update` takes per-element updates: `(init, update)` (optax's).

    Its `update` has `AggregatorUpdateFn`'s signature, a transform's, but what it is given is
    per-element gradients, `[*batch_shape, *param_shape]` per leaf, and what it returns is
    shaped like the params. The class tells `process` (which returns an `Aggregator` when
    given one) and its users which of the two kinds of gradients to feed it:
    `updates, state = aggregator.update(jax.vmap(jax.grad(loss), (None, 0))(params, batch), state)`.
    It is `LeafWise` (it reduces each leaf over its per-element axes), and gradtx's aggregators
    are marked as taking per-element gradients, so `gradtx.chain(aggregator, ...)` does not
    compare their shapes with the params'.

    Attributes:
      init: `params -> state`.
      update: `(per_elt_updates, state, params=None, **extra_args) -> (updates, state)`.
    """

    __slots__ = ()


def _is_aggregator(tx: Any) -> bool:
    """Whether `tx` is an `Aggregator`, gradtx's or optax's."""
    return isinstance(tx, Aggregator) or any(c.__name__ == "Aggregator" for c in type(tx).__mro__)


def process(
    preprocessor: _protocol.GradientTransformation,
    aggregator: _protocol.GradientTransformation | Aggregator,
    postprocessor: _protocol.GradientTransformation,
    aggregator_has_aux: bool = False,
) -> _protocol.GradientTransformation | Aggregator:
    r"""Run `preprocessor` on the per-element gradients, `aggregator` on the result, then `postprocessor`.

    .. math:: u = \mathrm{post}\big(\mathrm{agg}(\mathrm{pre}(g_1, \dots, g_B))\big)

    `optax.experimental.aggregating.process`. The postprocessor runs only when the aggregator's
    state says `ready` (`accumulate_avg_updates` and the accumulating statistics keep it;
    without one it always runs); on the other steps the updates are zeros and the
    postprocessor's state is kept. With `aggregator_has_aux`, the aggregator returns
    `(updates, aux)` and the dict `aux` is passed to the postprocessor as extra arguments
    (`add_mean_variance_to_opt` passes the per-element statistics so). Extra arguments of
    `update` go to all three; a transform that takes none drops them.

    Args:
      preprocessor: a transform of the per-element gradients (say, clipping each example).
      aggregator: what turns them into one update: an `Aggregator`, or a transform (of
        updates already averaged, e.g. `accumulate_avg_updates`).
      postprocessor: the transform of the aggregated update (an optimizer).
      aggregator_has_aux: whether the aggregator returns `(updates, aux)` with a dict `aux`.

    Returns:
      An `Aggregator` if `aggregator` is one (else a `GradientTransformation`), with state
      `(preprocessor's, aggregator's, postprocessor's)`.

    Raises:
      TypeError: if an argument is not a transform, or `aggregator_has_aux` is not a bool.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from gradtx.combinators import _aggregating as aggregating
        >>> opt = aggregating.process(
        ...     gradtx.identity(), aggregating.average_per_element_updates(), gradtx.sgd(0.5))
        >>> params = jnp.zeros(2)
        >>> per_example = jnp.array([[1.0, 0.0], [3.0, 2.0]])  # two examples
        >>> opt.update(per_example, opt.init(params), params)[0]
        Array([-1. , -0.5], dtype=float32)
    """
    fn = "process"
    for name, tx in (
        ("preprocessor", preprocessor),
        ("aggregator", aggregator),
        ("postprocessor", postprocessor),
    ):
        _checks.check_transform(fn, name, tx)
    _checks.check_bool(fn, "aggregator_has_aux", aggregator_has_aux)
    pre, agg, post = (_factory.member(tx) for tx in (preprocessor, aggregator, postprocessor))

    def init_fn(params):
        return pre.init(params), agg.init(params), post.init(params)

    def update_fn(updates, state, params=None, **extra_args):
        pre_state, agg_state, post_state = state
        per_elt, pre_state = pre.update(updates, pre_state, params, **extra_args)
        aggregated, agg_state = agg.update(per_elt, agg_state, params, **extra_args)
        if aggregator_has_aux:
            aggregated, aux = aggregated
            extra_args = extra_args | aux

        def run(g, s, p, kw):
            return post.update(g, s, p, **kw)

        def wait(g, s, p, kw):
            del p, kw
            return tree.zeros_like(g), s

        ready = tree.get(agg_state, "ready", True)
        updates, post_state = _control.cond(ready, run, wait, aggregated, post_state, params, extra_args)
        return updates, (pre_state, agg_state, post_state)

    if _is_aggregator(aggregator):
        return Aggregator(init_fn, _factory.per_example_grads(update_fn))
    return _protocol.GradientTransformation(init_fn, update_fn)


def average_per_element_updates(per_elt_axis: int | Sequence[int] = 0) -> Aggregator:
    r"""Average the per-element updates over `per_elt_axis`: :math:`u = \frac{1}{B} \sum_b g_b`.

    `optax.experimental.aggregating.average_per_element_updates`.

    Args:
      per_elt_axis: the per-element axis of every leaf, or a sequence of them.

    Returns:
      An `Aggregator` with state `EmptyState()`.

    Raises:
      TypeError: if `per_elt_axis` is neither an int nor a sequence of ints.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.combinators._aggregating import average_per_element_updates
        >>> agg = average_per_element_updates()
        >>> agg.update({"w": jnp.array([[1.0], [3.0]])}, agg.init(None))[0]
        {'w': Array([2.], dtype=float32)}
    """
    axes = check_axis("average_per_element_updates", per_elt_axis)

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(per_elt_updates, state, params=None, **extra_args):
        del params, extra_args
        return jax.tree.map(lambda x: jnp.mean(x, axis=axes), per_elt_updates), state

    return Aggregator(init_fn, _factory.per_example_grads(update_fn))


def average_incrementally_updates(
    per_elt_axis: MaybeAxis, accumulation_steps: int
) -> Aggregator | _protocol.GradientTransformation:
    """Average the per-element updates (unless `per_elt_axis` is None), then over `accumulation_steps` calls.

    `optax.experimental.aggregating.average_incrementally_updates`: `chain(
    average_per_element_updates(per_elt_axis), accumulate_avg_updates(accumulation_steps))`
    as an `Aggregator`, or `accumulate_avg_updates(accumulation_steps)` alone for `None`
    (for gradients already averaged over each microbatch).

    Args:
      per_elt_axis: the per-element axis of every leaf, a sequence of them, or None.
      accumulation_steps: the number of microbatches averaged (an int >= 1).

    Returns:
      An `Aggregator` with state `(EmptyState(), accumulate_avg_updates' state)`, or for
      `per_elt_axis=None` the transform `accumulate_avg_updates(accumulation_steps)`.

    Raises:
      TypeError: for a `per_elt_axis` that is not an int, a sequence of ints or None, or a
        non-int `accumulation_steps`.
      ValueError: for `accumulation_steps < 1`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.combinators._aggregating import average_incrementally_updates
        >>> agg = average_incrementally_updates(per_elt_axis=0, accumulation_steps=2)
        >>> state = agg.init(jnp.zeros(1))
        >>> u1, state = agg.update(jnp.array([[1.0], [3.0]]), state)  # mean 2
        >>> u2, state = agg.update(jnp.array([[4.0], [8.0]]), state)  # mean 6
        >>> u1, u2
        (Array([0.], dtype=float32), Array([4.], dtype=float32))
    """
    if per_elt_axis is None:
        return accumulate_avg_updates(accumulation_steps)
    both = chain(average_per_element_updates(per_elt_axis), accumulate_avg_updates(accumulation_steps))
    return Aggregator(both.init, both.update)


def get_per_element_mean_and_sum_sq_diff_grads(
    per_elt_axis: int | Sequence[int] = 0,
    accumulation_steps: int = 1,
) -> Aggregator:
    r"""Aggregate per-element gradients into their mean, with their sum of squared deviations as aux.

    .. math:: \bar g = \frac{1}{N} \sum_b g_b, \qquad S = \sum_b (g_b - \bar g)^2

    `optax.experimental.aggregating.get_per_element_mean_and_sum_sq_diff_grads`: `update`
    returns `((mean, {"sum_sq_diff_grads": S, "sample_size": N}), state)`, for
    `process(..., aggregator_has_aux=True)`. Over `accumulation_steps > 1` microbatches the
    statistics are merged as they come (Chan, Golub and LeVeque's pairwise formula) and
    emitted at the last one, zeros before; :math:`N` counts them all.

    Args:
      per_elt_axis: the per-element axis of every leaf, or a sequence of them.
      accumulation_steps: the number of microbatches merged (an int >= 1).

    Returns:
      An `Aggregator`; its state is `EmptyState()`, or with accumulation
      `PerElementMeanAndSumSqDiffGradsState(micro_step, ready, mean_grads, sum_sq_diff_grads)`.

    Raises:
      TypeError: for a `per_elt_axis` that is neither an int nor a sequence of ints, or a
        non-int `accumulation_steps`.
      ValueError: for `accumulation_steps < 1` (optax's never emits); at update time, for
        leaves with different batch sizes.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.combinators._aggregating import get_per_element_mean_and_sum_sq_diff_grads
        >>> agg = get_per_element_mean_and_sum_sq_diff_grads()
        >>> (mean, aux), _ = agg.update(jnp.array([[1.0], [3.0], [5.0]]), agg.init(jnp.zeros(1)))
        >>> mean, aux["sum_sq_diff_grads"], aux["sample_size"]
        (Array([3.], dtype=float32), Array([8.], dtype=float32), 3)

    References:
      Chan, Golub, LeVeque, *Updating formulae and a pairwise algorithm for computing sample
      variances*, Stanford CS tech. report STAN-CS-79-773, 1979.
    """
    init_fn, update_fn = mean_and_sum_sq_diff(per_elt_axis, accumulation_steps)
    return Aggregator(init_fn, _factory.per_example_grads(update_fn))


def add_mean_variance_to_opt(
    opt: _protocol.GradientTransformation,
    ema_decay: jax.typing.ArrayLike = 0.9,
    per_elt_axis: int | list[int] = 0,
    accumulation_steps: int = 1,
) -> Aggregator:
    """Train with `opt` on per-element gradients, tracking EMAs of the mean gradient and its variance.

    `optax.experimental.aggregating.add_mean_variance_to_opt`: `process(identity(),
    get_per_element_mean_and_sum_sq_diff_grads(per_elt_axis, accumulation_steps),
    chain(track_per_element_mean_and_variance_with_ema(ema_decay), opt),
    aggregator_has_aux=True)`. `opt` sees the mean gradient, as it would without this;
    `get_unbiased_mean_and_variance_ema(state)` reads the statistics.

    Args:
      opt: the optimizer of the mean gradient.
      ema_decay: the decay of the EMAs, in [0, 1).
      per_elt_axis: the per-element axis of every leaf, or a list of them.
      accumulation_steps: the number of microbatches per step of `opt` (an int >= 1).

    Returns:
      An `Aggregator` with state `(EmptyState(), the aggregator's, (PerElementMeanAndVarianceEMAState,
      opt's))`; its `update` takes per-element gradients.

    Raises:
      TypeError: for an `opt` that is not a transform, or a bad argument of the parts.
      ValueError: for `ema_decay` outside [0, 1) or `accumulation_steps < 1`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from gradtx.combinators import _aggregating as aggregating
        >>> opt = aggregating.add_mean_variance_to_opt(gradtx.sgd(0.1), ema_decay=0.5)
        >>> params = jnp.zeros(2)
        >>> state = opt.init(params)
        >>> _, state = opt.update(jnp.array([[1.0, 0.0], [3.0, 0.0]]), state, params)
        >>> aggregating.get_unbiased_mean_and_variance_ema(state)
        (Array([2., 0.], dtype=float32), Array([2., 0.], dtype=float32))
    """
    _checks.check_transform("add_mean_variance_to_opt", "opt", opt)
    pipeline = process(
        identity(),
        get_per_element_mean_and_sum_sq_diff_grads(per_elt_axis, accumulation_steps),
        chain(track_per_element_mean_and_variance_with_ema(ema_decay), opt),
        aggregator_has_aux=True,
    )
    return cast(Aggregator, pipeline)  # the aggregator is one
