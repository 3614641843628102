"""`scale_by_param_block_norm`: each leaf of the updates times the L2 norm of its parameter."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core.rule import update_rule
from gradtx.transforms._adafactor import BlockRmsState


def _param_norm_leaf(u: jax.Array, w: jax.Array, h) -> tuple[jax.Array]:
    """`u * max(min_scale, ||w||)`: the norm of the whole leaf (Frobenius for a matrix)."""
    norm = jnp.sqrt(_formulas.squared_norm(w)).astype(_formulas.real_dtype(w.dtype))
    return (u * jnp.where(norm <= h.min_scale, h.min_scale, norm).astype(u.dtype),)


@_factory.api
def scale_by_param_block_norm(
    min_scale: _protocol.ScalarOrSchedule = 1e-3,
) -> _protocol.GradientTransformation:
    r"""Multiply each leaf of the updates by the L2 norm of its parameter (at least `min_scale`).

    .. math:: u \leftarrow u \cdot \max\big(\epsilon_2, \lVert w \rVert_2\big)

    the norm taken over the whole leaf (a vector's, a matrix's Frobenius norm), so that a
    learning rate is relative to the size of each parameter block; beside
    `scale_by_param_block_rms`, which uses the root mean square. These are the numbers of
    `optax.scale_by_param_block_norm`. A per-tensor rule: on packed parameters it sees
    per-leaf views. A row-sparse update is densified first.

    Args:
      min_scale: :math:`\epsilon_2`, the smallest factor (parameters at or near zero), > 0.

    Returns:
      A `LeafWise` transform; state `EmptyState()`, or `BlockRmsState(count)` for a schedule.

    Raises:
      ValueError: for a non-positive or non-finite `min_scale`; at update time, if `params`
        is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_param_block_norm()
        >>> params = jnp.array([3.0, -4.0])  # norm 5
        >>> tx.update(jnp.array([1.0, 0.5]), tx.init(params), params)[0]
        Array([5. , 2.5], dtype=float32)

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*,
      ICML 2018 (section 8, relative step size; here with the norm).
    """
    fn = "scale_by_param_block_norm"
    _checks.check_finite(fn, "min_scale", min_scale)
    _checks.check_positive(fn, "min_scale", min_scale)
    return update_rule(
        fn,
        BlockRmsState,
        _param_norm_leaf,
        hyper={"min_scale": min_scale},
        reads_params=True,
        kind=_protocol.LeafWise,
        count="if_scheduled",
    )
