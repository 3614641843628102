"""RETURNN's `NormalizedSGD`: `scale_by_l2_normalization`, `normalized_sgd`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByL2NormalizationState(NamedTuple):
    """State of `scale_by_l2_normalization` when `eps` is a schedule."""

    count: _protocol.Count  # int32: completed updates


def _normalized(x: jax.Array, eps: jax.Array) -> jax.Array:
    """`x / sqrt(max(sum(|x|^2), eps))`, the sum taken in float32 at least (also for bf16 gradients)."""
    squared = _sliced.total(_formulas.squared_norm(x))  # the whole tensor's, on ZeRO's slices too
    return x * lax.rsqrt(jnp.maximum(squared, jnp.real(eps))).astype(x.dtype)


def _l2_leaf(g, h):
    return (_normalized(g, h.eps),)


def _l2_values(g, h):
    """A row-sparse gradient: its values as they are, duplicates included (TF's `IndexedSlices`)."""
    return (g.with_values(_normalized(g.values, h.eps)),)


@_registry.transform()
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
    return update_rule(
        fn,
        ScaleByL2NormalizationState,
        _l2_leaf,
        hyper={"eps": eps},
        sparse=_l2_values,
        kind=_protocol.SliceWise,  # the norm is the whole tensor's (`_sliced.total`)
        count="if_scheduled",
        tf_scalars=True,
    )


@_registry.optimizer("NormalizedSGD")
def normalized_sgd(learning_rate: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""RETURNN's `NormalizedSGD`: SGD on each gradient tensor divided by its L2 norm.

    This is `chain(scale_by_l2_normalization(), scale_by_learning_rate(learning_rate))`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.normalized_sgd(0.5).update(jnp.array([3.0, 4.0]), ((), ()))[0]
        Array([-0.3, -0.4], dtype=float32)
    """
    return chain(scale_by_l2_normalization(), scale_by_learning_rate(learning_rate))


__all__ = ["ScaleByL2NormalizationState", "normalized_sgd", "scale_by_l2_normalization"]
