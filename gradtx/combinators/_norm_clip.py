"""Norms of updates: the public `global_norm`, and `adaptive_grad_clip` (AGC, unit-wise norms)."""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx.combinators import _unitwise
from gradtx.combinators._clip import ClipState


def global_norm(tree: Any) -> jax.Array:
    r"""The L2 norm of all the arrays of a tree taken together (`optax.global_norm`, `tf.linalg.global_norm`).

    .. math:: \lVert u \rVert = \sqrt{\textstyle\sum_i \lVert u_i \rVert_2^2}

    TF's arithmetic (twice the sum of `l2_loss`), summed in at least float32 (so bf16
    leaves do not overflow); `None` leaves are skipped, a row-sparse leaf counts by its
    values, and an empty tree has norm 0. This is the norm `clip_by_global_norm` clips by.

    Args:
      tree: a pytree of arrays (gradients, updates, parameters).

    Returns:
      A float32 scalar (float64 when the leaves are float64).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.global_norm({"a": jnp.array([3.0]), "b": jnp.array([[4.0]]), "c": None})
        Array(5., dtype=float32)
    """
    return _formulas.global_norm(tree)


@_registry.transform()
def adaptive_grad_clip(
    clipping: _protocol.ScalarOrSchedule,
    eps: _protocol.ScalarOrSchedule = 1e-3,
    axis: int | Sequence[int] | None = None,
) -> _protocol.GradientTransformation:
    r"""Clip each unit's update to at most `clipping` times its parameter's norm: adaptive gradient clipping.

    For each unit :math:`i` (a row, an output channel; see below) of a gradient :math:`G`
    and its parameter :math:`W`:

    .. math::
        G_i \leftarrow \begin{cases}
            \lambda \dfrac{\max(\lVert W_i \rVert, \epsilon)}{\max(\lVert G_i \rVert, 10^{-6})}\, G_i
                & \lVert G_i \rVert \ge \lambda \max(\lVert W_i \rVert, \epsilon) \\
            G_i & \text{otherwise}
        \end{cases}

    as `optax.adaptive_grad_clip` (NFNets' AGC). Without `axis`, the units follow the
    layer conventions: a scalar or vector is one unit; a matrix `[in, out]` (or a 3-D
    multi-head kernel) has one unit per slice along the last axes, its norm summed over
    axis 0; a 4-D (HWIO) or 5-D convolution kernel one per output channel. A per-tensor
    rule: on packed parameters it sees per-leaf views. A row-sparse gradient is densified.

    Args:
      clipping: :math:`\lambda`, the largest ratio of unit update norm to unit parameter
        norm, > 0 (number, scalar array or schedule).
      eps: :math:`\epsilon`, the smallest parameter norm used, so zero-initialised units
        can move, >= 0 (number, scalar array or schedule).
      axis: the axis or axes each unit's norm sums over, for every leaf (instead of the
        defaults by rank).

    Returns:
      A `GradientTransformation` (state `EmptyState()`, or `ClipState(count)` when an
      argument is a schedule).

    Raises:
      TypeError: for a non-number argument or a bad `axis`.
      ValueError: for `clipping <= 0` or `eps < 0`; at update time, if `params` is missing or a
        leaf has more than 5 dimensions and no `axis` is given.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adaptive_grad_clip(0.1)
        >>> params = jnp.array([[3.0, 0.0], [4.0, 1.0]])  # unit norms (columns): 5 and 1
        >>> grads = jnp.array([[0.0, 0.3], [2.0, 0.4]])  # unit norms: 2 and 0.5
        >>> out, _ = tx.update(grads, tx.init(params), params)  # scaled to norms 0.5 and 0.1
        >>> out.round(4)
        Array([[0.  , 0.06],
               [0.5 , 0.08]], dtype=float32)

    References:
      Brock, De, Smith, Simonyan, *High-Performance Large-Scale Image Recognition Without
      Normalization*, ICML 2021.
    """
    fn = "adaptive_grad_clip"
    for name, value in (("clipping", clipping), ("eps", eps)):
        _checks.check_finite(fn, name, value)
    _checks.check_positive(fn, "clipping", clipping)
    _checks.check_nonnegative(fn, "eps", eps)
    _unitwise.check_axis(fn, axis)
    scheduled = _hyper.any_schedule(clipping, eps)
    name = _checks.api_name(fn)

    def init_fn(params):
        del params
        return ClipState(_hyper.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise _protocol.missing_params(fn)
        count = state.count if scheduled else None
        lam, floor = _hyper.resolve(clipping, count), _hyper.resolve(eps, count)
        dense = sparse.densify(updates)
        leaves, (flat_params,), treedef = _walk.flatten_updates(
            fn, dense, params, names=("updates", "params")
        )
        paths = _walk.key_paths(dense)

        def leaf(g, p, path):
            if g is None:
                return None
            axes = _unitwise.unit_axes(name, path, g.shape, axis)
            g_norm, p_norm = _unitwise.unit_norm(g, axes), _unitwise.unit_norm(p, axes)
            max_norm = _hyper.like(lam, g_norm) * jnp.maximum(p_norm, _hyper.like(floor, p_norm))
            return _unitwise.unitwise_clip(g_norm, max_norm, g)

        out = treedef.unflatten([leaf(*args) for args in zip(leaves, flat_params, paths, strict=True)])
        return out, (ClipState(_hyper.increment(state.count)) if scheduled else state)

    return _protocol.GradientTransformation(init_fn, update_fn)
