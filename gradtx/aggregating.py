"""Aggregators: from per-example gradients to one update (optax's `experimental.aggregating`).

`process(preprocessor, aggregator, postprocessor)` clips or otherwise transforms each
example's gradient, averages them (over microbatches too) and runs an optimizer on the
average at the steps the aggregator says it is ready; `add_mean_variance_to_opt` tracks the
per-element mean and variance of the gradients beside an optimizer. optax's names,
signatures, state layouts and numbers (`gradtx.optax_compat.experimental.aggregating`
gives them under optax's path).
"""

from gradtx.combinators._aggregating import (
    AccumulateAvgUpdatesState,
    AggregatedUpdates,
    Aggregator,
    AggregatorUpdateFn,
    MaybeAxis,
    PerElementMeanAndSumSqDiffGradsState,
    PerElementMeanAndVarianceEMAState,
    PerElementUpdates,
    accumulate_avg_updates,
    add_mean_variance_to_opt,
    average_incrementally_updates,
    average_per_element_updates,
    get_batch_size_from_per_elt_updates,
    get_per_element_mean_and_sum_sq_diff_grads,
    get_unbiased_mean_and_variance_ema,
    process,
    track_per_element_mean_and_variance_with_ema,
)

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
