"""GaLore (Zhao et al. 2024) as an optimizer: `scale_by_galore`, decoupled weight decay, the learning rate."""

from __future__ import annotations

from typing import Any

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain, scale_by_galore
from gradtx.transforms import scale_by_learning_rate


@_factory.api
def galore(
    learning_rate: _protocol.ScalarOrSchedule,
    rank: int = 128,
    update_proj_gap: int = 200,
    scale: float = 1.0,
    base_optimizer: Any = None,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    mask: Any = None,
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    r"""GaLore: a base optimizer (Adam by default) on low-rank projections of the matrices' gradients.

    `chain(scale_by_galore(rank, update_proj_gap, scale, base_optimizer, weight_dimension_numbers),
    add_decayed_weights(weight_decay, mask=mask), scale_by_learning_rate(learning_rate))`: the
    base optimizer's state is kept for an :math:`r \times n` (or :math:`m \times r`) projection of
    each matrix, the projectors renewed from the gradient's SVD every `update_proj_gap` steps
    (see `scale_by_galore`); the weight decay is added in the full space and multiplied by the
    rate, as AdamW's. These are the numbers of `optax.contrib.galore`. A row-sparse gradient is
    densified.

    Args:
      learning_rate: the learning rate, >= 0 (number, scalar array or schedule).
      rank: the rank of the projection (an int >= 1; capped at each matrix's sides).
      update_proj_gap: the steps between renewals of the projectors (an int >= 1).
      scale: multiplies the projected-back steps, >= 0.
      base_optimizer: the transform run in the low-rank space (default: optax's `scale_by_adam`,
        `scale_by_bias_corrected_adam()`); a rule of the gradients alone.
      weight_decay: the decoupled weight decay, >= 0 (number, scalar array or schedule).
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      weight_dimension_numbers: which axes form each parameter's matrix (see `scale_by_galore`).

    Returns:
      A `LeafWise` chain with state `(GaLoreState, AddDecayedWeightsState or EmptyState, EmptyState)`.

    Raises:
      TypeError: for a non-int `rank` or `update_proj_gap`, or a non-transform `base_optimizer`.
      ValueError: for `rank` or `update_proj_gap` < 1, a bad rate or weight decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.galore(learning_rate=0.1, rank=1)
        >>> params = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
        >>> u, state = tx.update(params, tx.init(params), params)  # Adam's first step: -lr sign
        >>> [round(float(v), 4) for v in u["b"]], state[0].projector["w"].shape
        ([-0.1, -0.1], (3, 1))

    References:
      Zhao, Zhang, Chen, Wang, Anandkumar, Tian, *GaLore: Memory-efficient LLM training by
      gradient low-rank projection*, ICML 2024 (arXiv:2403.03507).
    """
    return chain(
        scale_by_galore(rank, update_proj_gap, scale, base_optimizer, weight_dimension_numbers),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )
