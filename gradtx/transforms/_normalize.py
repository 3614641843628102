"""Normalization of each gradient tensor: `scale_by_l2_normalization` (RETURNN's NormalizedSGD)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from gradtx import _base, _checks, _protocol, _tree


class ScaleByL2NormalizationState(NamedTuple):
    """State of `scale_by_l2_normalization` when `eps` is a schedule."""

    count: _protocol.Count  # int32: completed updates


@_base.api
def scale_by_l2_normalization(eps: _protocol.ScalarOrSchedule = 1e-12) -> _protocol.GradientTransformation:
    r"""Divide each gradient tensor by its L2 norm (`tf.nn.l2_normalize(g, None)`): RETURNN's NormalizedSGD.

    .. math:: u = g \,/\, \sqrt{\max(\textstyle\sum g^2, \epsilon)}

    A row-sparse gradient is normalized over its values as they are (duplicates included),
    as TF normalizes the values of an `IndexedSlices`.

    Args:
      eps: the lower bound of the squared norm, >= 0 (TF's default 1e-12).

    Returns:
      A `GradientTransformation`; state `EmptyState()`, or `ScaleByL2NormalizationState(count)`
      for a schedule.

    Raises:
      ValueError: for a negative `eps`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.scale_by_l2_normalization().update(jnp.array([3.0, 4.0]), ())[0]
        Array([0.6, 0.8], dtype=float32)

    References:
      RETURNN, `returnn/tf/updater.py`: `NormalizedSGD`; TensorFlow, `tf.nn.l2_normalize`.
    """
    fn = "scale_by_l2_normalization"
    _checks.check_nonnegative(fn, "eps", eps)
    scheduled = _tree.any_schedule(eps)

    def init_fn(params):
        del params
        return ScaleByL2NormalizationState(_tree.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        e = _tree.resolve(eps, state.count if scheduled else None)

        def leaf(g):
            x = _tree.values_of(g)
            squared = _tree.squared_norm(x)  # summed in float32 at least, also for bf16 gradients
            scale = lax.rsqrt(jnp.maximum(squared, _tree.like(e, squared)))
            return _tree.with_values(g, x * scale.astype(x.dtype))

        out = _tree.map_updates(fn, leaf, updates)
        return out, (ScaleByL2NormalizationState(_tree.increment(state.count)) if scheduled else state)

    return _protocol.GradientTransformation(init_fn, update_fn)
