"""Loss scaling for float16 training: `loss_scaled` (TF1's MixedPrecisionLossScaleOptimizer), `scale_loss`."""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx.combinators import _carry
from gradtx.combinators._apply_if_finite import step_is_finite
from gradtx.combinators._zeroing import _zeros

LOSS_SCALES = ("dynamic",)
"""The named loss scales of `loss_scaled` (a number gives a fixed scale)."""


class LossScaleState(NamedTuple):
    """State of `loss_scaled` (TF's loss-scale variables `current_loss_scale` and `good_steps`)."""

    loss_scale: jax.Array  # float32: the scale the loss of the next step is multiplied by
    good_steps: jax.Array  # int32: finite steps in a row since the last non-finite one or scale change
    inner_state: Any  # the inner transform's state; kept as it is at a skipped step


def _check_loss_scale(fn: str, loss_scale: Any) -> None:
    if isinstance(loss_scale, str):
        _checks.check_one_of(fn, "loss_scale", loss_scale, LOSS_SCALES)
        return
    if isinstance(loss_scale, bool) or not isinstance(loss_scale, numbers.Real):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `loss_scale` must be 'dynamic' or a Python number (a fixed scale, "
            f"TF's FixedLossScale), got {loss_scale!r} of type {type(loss_scale).__name__}."
        )
    _checks.check_finite(fn, "loss_scale", loss_scale)
    if loss_scale < 1:
        raise ValueError(f"`{_checks.api_name(fn)}`: `loss_scale` must be >= 1, got {loss_scale!r}.")


def _unscaled(fn: str, updates: Any, scale: jax.Array) -> Any:
    """The gradients times `1 / scale` (TF's `grad * (1 / loss_scale)`, in float32 or the gradient's wider
    dtype, then back to the gradient's dtype); a row-sparse one in its values."""
    reciprocal = 1 / scale

    def leaf(g):
        v = _walk.values_of(g)
        wide = jnp.promote_types(v.dtype, reciprocal.dtype)
        return _walk.with_values(g, (v.astype(wide) * reciprocal.astype(wide)).astype(v.dtype))

    return _walk.map_updates(fn, leaf, updates)


@_registry.wrapper("MixedPrecisionLossScaleOptimizer")
def loss_scaled(
    tx: Any,
    loss_scale: str | float = "dynamic",
    *,
    initial_loss_scale: float = 2.0**15,
    increment_period: int = 2000,
    multiplier: float = 2.0,
) -> _protocol.GradientTransformation:
    r"""Divide the gradients of a scaled loss by the scale and apply `tx`; a dynamic scale skips overflows.

    TF1's `tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer` for float16
    training: multiply the loss by the scale before differentiating (`scale_loss(loss,
    state)`), so that small float16 gradients do not underflow, and give the scaled gradients
    to this transform, which multiplies them by :math:`1/s` and applies `tx`. With a number,
    the scale is fixed (TF's `FixedLossScale`) and every step is applied, a non-finite one
    included (as TF's). With `"dynamic"` (TF's `DynamicLossScale`), after each step:

    .. math::
        \text{finite:}\ \ n \leftarrow n + 1;\ \text{if } n \ge \text{increment\_period}:\
        n \leftarrow 0,\ s \leftarrow s \cdot m \text{ (if finite)} \qquad
        \text{not finite:}\ \ n \leftarrow 0,\ s \leftarrow \max(s / m, 1)

    and a step that is not finite is skipped: zero updates, the inner state kept (TF does not
    run the inner `apply_gradients`, nor increment its global step). A step is not finite when
    its gradient is not, or when `tx`'s update is not while its state is finite
    (`apply_if_finite`'s test): around `parallel.cross_shard`, a NaN on one replica reaches
    every replica's averaged update, so every replica skips the step and changes the scale
    alike (TF all-reduces the flag); `loss_scaled(cross_shard(tx, axis))` or
    `cross_shard(loss_scaled(tx), axis)`. Inside `accumulate_gradients(loss_scaled(tx), k)` a
    bad accumulated gradient is skipped; `loss_scaled(accumulate_gradients(tx, k))` skips
    (drops) a bad micro-batch gradient and changes the scale at once. The scale is float32
    (TF's variable); `good_steps` is int32 (TF's is int64).

    Args:
      tx: the transform applied to the unscaled gradients.
      loss_scale: `"dynamic"`, or a number >= 1 for a fixed scale.
      initial_loss_scale: the dynamic scale at the start (> 0; TF's default 2**15, about
        half float16's largest value).
      increment_period: how many finite steps in a row multiply the dynamic scale (an int >= 1).
      multiplier: what the dynamic scale is multiplied by after `increment_period` finite
        steps and divided by after a non-finite one (>= 1).

    Returns:
      A `GradientTransformation` with state `LossScaleState(loss_scale, good_steps, inner_state)`,
      `ElementWise` when `tx` is.

    Raises:
      ValueError: for a `loss_scale` other than "dynamic" or a number >= 1, an
        `initial_loss_scale` <= 0, an `increment_period` < 1 or a `multiplier` < 1 (or any of
        them not finite).
      TypeError: for a non-transform `tx`, a `loss_scale` that is neither a string nor a
        number, or a non-integer `increment_period`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.loss_scaled(gradtx.sgd(0.5), initial_loss_scale=8.0, increment_period=2)
        >>> w = jnp.ones(2)
        >>> state = tx.init(w)
        >>> for target in (0.0, jnp.inf, 0.0):  # the middle loss overflows
        ...     grads = jax.grad(lambda w: gradtx.scale_loss(jnp.sum((w - target) ** 2) / 2, state))(w)
        ...     updates, state = tx.update(grads, state, w)
        ...     w = gradtx.apply_updates(w, updates)
        ...     print(w, state.loss_scale, state.good_steps)
        [0.5 0.5] 8.0 1
        [0.5 0.5] 4.0 0
        [0.25 0.25] 4.0 1

    References:
      `tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer`, `FixedLossScale` and
      `DynamicLossScale` (tensorflow/python/training/experimental/loss_scale_optimizer.py,
      loss_scale.py); Micikevicius et al., "Mixed Precision Training", ICLR 2018.
    """
    fn = "loss_scaled"
    _checks.check_transform(fn, "tx", tx)
    _check_loss_scale(fn, loss_scale)
    _checks.check_number(fn, "initial_loss_scale", initial_loss_scale)
    _checks.check_positive(fn, "initial_loss_scale", initial_loss_scale)
    _checks.check_int(fn, "increment_period", increment_period, minimum=1)
    _checks.check_number(fn, "multiplier", multiplier)
    _checks.check_in_range(fn, "multiplier", multiplier, 1.0, float("inf"), high_open=True)
    inner = _factory.member(tx)
    dynamic = loss_scale == "dynamic"
    start = float(initial_loss_scale if dynamic else loss_scale)

    def init_fn(params):
        return LossScaleState(jnp.asarray(start, jnp.float32), _hyper.zero_count(), inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        scale = jnp.asarray(state.loss_scale, jnp.float32)
        grads = _unscaled(fn, updates, scale)
        out, inner_state = inner.update(grads, state.inner_state, params, **extra_args)
        if not dynamic:  # TF's FixedLossScale: every step applied
            return out, LossScaleState(scale, state.good_steps, inner_state)
        finite = step_is_finite(grads, out, state.inner_state)
        out = _walk.where(finite, out, _walk.map_updates(fn, _zeros, out))
        kept = _carry.as_returned(fn, state.inner_state, inner_state)
        inner_state = _walk.where(finite, inner_state, kept)
        good = state.good_steps + 1
        grow = finite & (good >= increment_period)
        grown = scale * multiplier
        scale = jnp.where(
            finite,
            jnp.where(grow & jnp.isfinite(grown), grown, scale),
            jnp.maximum(scale / multiplier, 1.0),
        )
        good = jnp.where(finite & jnp.logical_not(grow), good, 0).astype(jnp.int32)
        return out, LossScaleState(scale.astype(jnp.float32), good, inner_state)

    return _factory.composite(init_fn, update_fn, inner)


def scale_loss(loss: Any, state: Any) -> jax.Array:
    """The loss times the current loss scale of a `loss_scaled` state (TF's `loss * loss_scale`).

    Differentiate this, not the loss, and give the gradients to the `loss_scaled` transform,
    which divides them by the same scale. `state` is the `LossScaleState` itself or any state
    holding exactly one (a chain's, a wrapper's).

    Args:
      loss: the loss (a scalar; the scale is cast to its dtype, as TF does).
      state: a state holding one `LossScaleState`.

    Returns:
      `loss * loss_scale`, in the loss's dtype.

    Raises:
      ValueError: if `state` holds no `LossScaleState`, or more than one.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.loss_scaled(gradtx.sgd(0.1), 128.0))
        >>> gradtx.scale_loss(jnp.asarray(0.5, jnp.float16), tx.init(jnp.zeros(1)))
        Array(64., dtype=float16)
    """
    found = [
        s
        for s in jax.tree.leaves(state, is_leaf=lambda x: isinstance(x, LossScaleState))
        if isinstance(s, LossScaleState)
    ]
    if len(found) != 1:
        raise ValueError(
            f"`scale_loss`: `state` must hold exactly one `LossScaleState` (the state of a `loss_scaled` "
            f"transform), found {len(found)}."
        )
    loss = jnp.asarray(loss)
    return loss * jnp.asarray(found[0].loss_scale).astype(loss.dtype)
