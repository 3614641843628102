"""optax's state classes, where gradtx's building block keeps the same numbers under other field names.

Each is filled by a gradtx rule (`gradtx._core.rule.restated`): the same slots, named as
optax names them, so code that reads `state[0].mu` or calls `optax.tree.get(state, "nu")`,
and checkpoints written by optax, find what they expect.
"""

from __future__ import annotations

from typing import NamedTuple

from gradtx._core import protocol as _protocol


class ScaleByAdamState(NamedTuple):
    """State of `scale_by_adam`, `scale_by_radam` and `scale_by_yogi` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment
    nu: _protocol.Updates  # second moment


class ScaleByBeliefState(NamedTuple):
    """State of `scale_by_belief` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment
    nu: _protocol.Updates  # the belief: moving average of (g - mu)^2


class ScaleByLionState(NamedTuple):
    """State of `scale_by_lion` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the momentum


class ScaleByNovogradState(NamedTuple):
    """State of `scale_by_novograd` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment
    nu: _protocol.Updates  # per-leaf second moment of the gradient's norm


# `nu` is one scalar per leaf: only `mu` is compared with the params' shapes (`_tree_checks.check_shapes`)
setattr(ScaleByNovogradState, "slots_shaped_like_params", ("mu",))  # noqa: B010  (not a field)


class ScaleBySM3State(NamedTuple):
    """State of `scale_by_sm3` (optax's layout: no count)."""

    mu: _protocol.Updates  # the per-dimension accumulators of each leaf
    nu: _protocol.Updates  # the momentum


class ScaleByAdanState(NamedTuple):
    """State of `scale_by_adan` (optax's layout: the count last, named `t`)."""

    m: _protocol.Updates  # first moment of the gradients
    v: _protocol.Updates  # first moment of the gradient differences
    n: _protocol.Updates  # second moment of the Nesterov-corrected gradients
    g: _protocol.Updates  # the previous gradient
    t: _protocol.Count  # int32: completed updates


class FactoredState(NamedTuple):
    """State of `scale_by_factored_rms` (optax's name for it)."""

    count: _protocol.Count  # int32: completed updates
    v_row: _protocol.Updates  # row statistics of factored leaves
    v_col: _protocol.Updates  # column statistics of factored leaves
    v: _protocol.Updates  # full statistics of the other leaves


setattr(FactoredState, "slots_shaped_like_params", False)  # noqa: B010  (placeholders, row/column statistics)


class TraceState(NamedTuple):
    """State of `trace` (optax's layout: no count)."""

    trace: _protocol.Updates  # the momentum


class ScaleByRmsState(NamedTuple):
    """State of `scale_by_rms` (optax's layout: no count without bias correction)."""

    nu: _protocol.Updates  # second moment


class ScaleByRmsWithCountState(NamedTuple):
    """State of `scale_by_rms(bias_correction=True)` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    nu: _protocol.Updates  # second moment


class ScaleByRStdDevState(NamedTuple):
    """State of `scale_by_stddev` (optax's layout: no count without bias correction)."""

    mu: _protocol.Updates  # first moment
    nu: _protocol.Updates  # second moment


class ScaleByRStdDevWithCountState(NamedTuple):
    """State of `scale_by_stddev(bias_correction=True)` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment
    nu: _protocol.Updates  # second moment


class ScaleByRssState(NamedTuple):
    """State of `scale_by_rss` (optax's layout: no count)."""

    sum_of_squares: _protocol.Updates  # the sum of squared gradients


class ScaleByRpropState(NamedTuple):
    """State of `scale_by_rprop` (optax's layout: no count)."""

    step_sizes: _protocol.Updates  # per-element step sizes
    prev_updates: _protocol.Updates  # the previous gradients (0 where the sign flipped)


class ScaleByAmsgradState(NamedTuple):
    """State of `scale_by_amsgrad` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment
    nu: _protocol.Updates  # second moment
    nu_max: _protocol.Updates  # the running maximum of the (corrected) second moment


class ScaleByAdaDeltaState(NamedTuple):
    """State of `scale_by_adadelta` (optax's layout: no count)."""

    e_g: _protocol.Updates  # moving average of squared gradients
    e_x: _protocol.Updates  # moving average of squared updates
