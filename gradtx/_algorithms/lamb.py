"""LAMB: `scale_by_trust_ratio` and `lamb` (optax's numbers)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._algorithms.adam import scale_by_bias_corrected_adam
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByTrustRatioState(NamedTuple):
    """State of `scale_by_trust_ratio` when a hyperparameter is a schedule."""

    count: _protocol.Count  # int32: completed updates


def _norm_at_least(x: jax.Array, floor: Any) -> jax.Array:
    """`max(||x||, floor)` of one leaf (the norm of an all-zero leaf is 0 when `floor` is 0)."""
    norm = _formulas.leaf_norm(x)
    return jnp.where(norm <= floor, floor, norm)


def _trust_ratio_leaf(u, w, h):
    """One leaf: `u * coefficient * ||w|| / (||u|| + eps)`, or `u` when either norm is 0."""
    w_norm = _norm_at_least(w, h.min_norm)
    u_norm = _norm_at_least(u, h.min_norm)
    ratio = h.trust_coefficient * w_norm / (u_norm + h.eps)
    ratio = jnp.where((w_norm == 0) | (u_norm == 0), jnp.ones_like(ratio), ratio)
    return (u * ratio.astype(u.dtype),)


@_registry.transform()
def scale_by_trust_ratio(
    min_norm: _protocol.ScalarOrSchedule = 0.0,
    trust_coefficient: _protocol.ScalarOrSchedule = 1.0,
    eps: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""Multiply each leaf of the updates by its trust ratio: the parameter's norm over the update's.

    For each leaf (a layer's weight matrix, a bias):

    .. math::
        r = \begin{cases}
            \dfrac{c\, \max(\lVert w\rVert, n_0)}{\max(\lVert u\rVert, n_0) + \epsilon}
            & \text{both norms} > 0 \\ 1 & \text{otherwise} \end{cases},
        \qquad u \leftarrow r\, u

    so that every layer moves by about `learning_rate` times its own norm. After an Adam
    step with weight decay this is LAMB's per-layer scaling (`optax.scale_by_trust_ratio`;
    contrib's LARS has its own form, `scale_by_lars`). A row-sparse update is densified
    first (the norm is the whole tensor's).

    Args:
      min_norm: :math:`n_0`, the smallest norm used for either tensor, >= 0.
      trust_coefficient: :math:`c`, finite.
      eps: added to the update's norm, >= 0.

    Returns:
      A `GradientTransformation`; state `EmptyState()`, or `ScaleByTrustRatioState(count)`
      when a hyperparameter is a schedule.

    Raises:
      ValueError: for a negative `min_norm` or `eps`, or a non-finite value; at update
        time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_trust_ratio()
        >>> params = jnp.array([3.0, 4.0])  # norm 5
        >>> tx.update(jnp.array([0.0, 10.0]), tx.init(params), params)[0]  # norm 10: r = 0.5
        Array([0., 5.], dtype=float32)

    References:
      You et al., *Large batch optimization for deep learning: training BERT in 76 minutes*,
      ICLR 2020 (Algorithm 2, LAMB).
    """
    fn = "scale_by_trust_ratio"
    _checks.check_finite(fn, "min_norm", min_norm)
    _checks.check_nonnegative(fn, "min_norm", min_norm)
    _checks.check_finite(fn, "trust_coefficient", trust_coefficient)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    return update_rule(
        fn,
        ScaleByTrustRatioState,
        _trust_ratio_leaf,
        hyper={"min_norm": min_norm, "trust_coefficient": trust_coefficient, "eps": eps},
        reads_params=True,
        kind=_protocol.SliceWise,  # the norms are the whole tensor's (on ZeRO's slices too: `leaf_norm`)
        count="if_scheduled",
    )


@_registry.optimizer("LAMB")
def lamb(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
    min_norm: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""LAMB: Adam with weight decay, each layer's step scaled by its trust ratio (its norm over the step's).

    `chain(scale_by_bias_corrected_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay,
    mask=mask), scale_by_trust_ratio(min_norm), scale_by_learning_rate(learning_rate))`: the
    numbers of `optax.lamb`. Each leaf moves by about `learning_rate` times its own norm, so
    large batches train with one rate for all layers; a leaf never changes sign by itself
    (its steps shrink with its norm) unless `min_norm` > 0 floors both norms. A row-sparse
    gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added under the root, >= 0.
      weight_decay: added to Adam's direction as `weight_decay * params`, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      min_norm: the trust ratio's floor on the parameter's and the step's norms, >= 0 (0: optax's).

    Returns:
      A `LeafWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, `eps_root`, weight decay, `min_norm` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lamb(0.1)
        >>> params = {"w": jnp.array([3.0, 4.0])}  # norm 5
        >>> u, _ = tx.update({"w": jnp.array([1.0, -1.0])}, tx.init(params), params)
        >>> [round(float(x), 4) for x in u["w"]]  # Adam's first step is sign(g); scaled to norm 0.1 * 5
        [-0.3536, 0.3536]

    References:
      You et al., *Large batch optimization for deep learning: training BERT in 76 minutes*,
      ICLR 2020 (Algorithm 2).
    """
    return chain(
        scale_by_bias_corrected_adam(b1, b2, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_trust_ratio(min_norm),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByTrustRatioState", "lamb", "scale_by_trust_ratio"]
