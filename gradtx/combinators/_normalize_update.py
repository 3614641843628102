"""`normalize_by_update_norm`: the updates divided by their global norm."""

from __future__ import annotations

from typing import NamedTuple

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import update_rule


class NormalizeByUpdateNormState(NamedTuple):
    """State of `normalize_by_update_norm` when an argument is a schedule."""

    count: _protocol.Count  # int32: completed updates


def _normalize_tree(gs, h):
    """Every leaf divided by `(||u|| + eps) / scale_factor`, `||u||` the norm of all leaves together."""
    divisor = (_formulas.global_norm(gs) + h.eps) / h.scale_factor
    return ([g / divisor.astype(g.dtype) for g in gs],)


@_registry.transform()
def normalize_by_update_norm(
    scale_factor: _protocol.ScalarOrSchedule = 1.0, eps: _protocol.ScalarOrSchedule = 1e-6
) -> _protocol.GradientTransformation:
    r"""Divide the updates by their global L2 norm, so that the step has norm `scale_factor`.

    .. math:: u \leftarrow \frac{s\, u}{\lVert u \rVert_2 + \epsilon}, \qquad
        \lVert u \rVert_2 = \sqrt{\textstyle\sum_i \lVert u_i \rVert_2^2}

    A normalized-gradient step: its length is :math:`s` whatever the gradient's (with a
    negative :math:`s`, a descent step on its own, as in optax's example). The norm is that
    of all leaves together (summed in at least float32, exact on ZeRO's slices), computed
    once per step; these are the numbers of `optax.normalize_by_update_norm` (its norm is
    summed in the leaves' dtype: equal to rounding). A row-sparse update is densified first.

    Args:
      scale_factor: :math:`s`, the norm of the step, nonzero (number, scalar array or
        schedule).
      eps: :math:`\epsilon`, added to the norm so that a zero update stays zero, >= 0.

    Returns:
      An `ElementWise` transform; state `EmptyState()`, or `NormalizeByUpdateNormState(count)`
      for a schedule.

    Raises:
      ValueError: for a zero or non-finite `scale_factor`, or a negative `eps`.
      TypeError: for a non-number argument.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.normalize_by_update_norm(eps=0.0)
        >>> tx.update({"a": jnp.array([3.0]), "b": jnp.array([4.0])}, tx.init(None))[0]
        {'a': Array([0.6], dtype=float32), 'b': Array([0.8], dtype=float32)}

    References:
      Nesterov, *Introductory Lectures on Convex Optimization*, 2004 (section 3.2.3,
      normalized gradient method).
    """
    fn = "normalize_by_update_norm"
    _checks.check_finite(fn, "scale_factor", scale_factor)
    if not _checks.is_schedule(scale_factor) and not _checks._is_traced(scale_factor):
        if scale_factor == 0:
            raise ValueError(
                f"`{_checks.api_name(fn)}`: `scale_factor` must be nonzero (it divides the norm), "
                f"got {scale_factor!r}."
            )
    _checks.check_nonnegative(fn, "eps", eps)
    return update_rule(
        fn,
        NormalizeByUpdateNormState,
        _normalize_tree,
        hyper={"scale_factor": scale_factor, "eps": eps},
        count="if_scheduled",
        over="tree",  # one norm over every leaf
    )
