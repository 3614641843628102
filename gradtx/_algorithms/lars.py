"""LARS (tf.contrib's `LARSOptimizer`): `scale_by_lars`, `lars`."""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._algorithms.momentum import _trace_leaf
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByLarsState(NamedTuple):
    """State of `scale_by_lars`."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # TF slot "momentum" (starts at 0)


def _trust_ratio(var: jax.Array, grad: jax.Array, eeta, weight_decay, eps) -> jax.Array:
    """`eeta * |w| / (|g| + weight_decay * |w| + eps)`, or 1 if `|w|` or `|g|` is 0 (contrib's compute_lr)."""
    w_norm = _formulas.leaf_norm(var)
    g_norm = _formulas.leaf_norm(grad)
    ratio = eeta * w_norm / (g_norm + weight_decay * w_norm + eps)
    return jnp.where(w_norm > 0, jnp.where(g_norm > 0, ratio, 1.0), 1.0)


def _lars_leaf(g, accum, w, h, *, path, nesterov, skip):
    """ApplyMomentum with the rate scaled by the variable's trust ratio (1 for a skipped variable)."""
    update, accum = _trace_leaf(g, accum, h, nesterov=nesterov)
    if any(s in _masks.path_str(path) for s in skip):
        return update, accum
    return update * _trust_ratio(w, g, h.eeta, h.weight_decay, h.eps).astype(update.dtype), accum


def _lars_rows(g, accum, w, h, *, path, nesterov):
    """contrib's sparse fallback: plain momentum on the touched rows (r = 1)."""
    del w, path
    return sparse.apply_rows(lambda gr, ar: _trace_leaf(gr, ar, h, nesterov=nesterov), g, accum)


@_registry.transform()
def scale_by_lars(
    momentum: _protocol.ScalarOrSchedule = 0.9,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    eeta: _protocol.ScalarOrSchedule = 0.001,
    eps: _protocol.ScalarOrSchedule = 0.0,
    *,
    skip: Sequence[str] = (),
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""LARS: TF's momentum kernel with the learning rate scaled per variable by a trust ratio.

    For each variable, before the update:

    .. math::
        r = \begin{cases}
            \dfrac{\eta\,\lVert w\rVert_2}{\lVert g\rVert_2 + \lambda \lVert w\rVert_2 + \epsilon}
            & \lVert w\rVert_2 > 0 \text{ and } \lVert g\rVert_2 > 0 \\ 1 & \text{otherwise} \end{cases},
        \qquad a_t = \mu a_{t-1} + g_t, \qquad u_t = r\, a_t

    (Nesterov: :math:`u_t = r\,(g_t + \mu a_t)`.) Followed by `scale_by_learning_rate(lr)`
    this is `tf.contrib.opt.LARSOptimizer`: `ApplyMomentum(lr * r, grad, momentum)`. The
    weight decay enters the trust ratio only; it is not added to the gradient. Variables
    whose key path contains a string of `skip` (contrib's `skip_list`, e.g. `"bias"`,
    `"batch_normalization"`) use r = 1. Row-sparse gradients take plain momentum on the
    touched rows with r = 1 (contrib's sparse fallback).

    Args:
      momentum: the momentum, in [0, 1].
      weight_decay: the weight decay in the trust ratio, >= 0.
      eeta: the LARS (trust) coefficient, >= 0.
      eps: added to the denominator of the trust ratio, >= 0.
      skip: key-path substrings of variables without LARS scaling.
      nesterov: use the Nesterov form of the momentum kernel.

    Returns:
      A `GradientTransformation` with state `ScaleByLarsState(count, momentum)`.

    Raises:
      ValueError: as contrib: negative momentum or weight decay; also a momentum above 1, a
        negative `eeta` or `eps`, or any value that is not finite.
      TypeError: if `skip` is not a sequence of strings.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_lars(momentum=0.0, weight_decay=0.0, eeta=1.0)
        >>> params = {"w": jnp.array([3.0, 4.0])}
        >>> tx.update({"w": jnp.array([0.0, 10.0])}, tx.init(params), params)[0]["w"]  # r = 5 / 10
        Array([0., 5.], dtype=float32)

    References:
      You, Gitman, Ginsburg, *Large batch training of convolutional networks*, 2017.
    """
    fn = "scale_by_lars"
    _checks.check_in_range(fn, "momentum", momentum, 0.0, 1.0)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_nonnegative(fn, "eeta", eeta)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "nesterov", nesterov)
    if (
        isinstance(skip, str)
        or not isinstance(skip, (list, tuple, set, frozenset))
        or not all(isinstance(s, str) for s in skip)
    ):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `skip` must be a list, tuple or set of strings (key-path "
            f"substrings), got {skip!r}."
        )
    skip = tuple(sorted(skip)) if isinstance(skip, (set, frozenset)) else tuple(skip)
    return update_rule(
        fn,
        ScaleByLarsState,
        functools.partial(_lars_leaf, nesterov=nesterov, skip=skip),
        hyper={"momentum": momentum, "weight_decay": weight_decay, "eeta": eeta, "eps": eps},
        slots={"momentum": 0.0},
        sparse=functools.partial(_lars_rows, nesterov=nesterov),
        reads_params=True,
        kind=_protocol.SliceWise,  # per-tensor norms through `leaf_norm`, skipped by key path
        paths=True,
        tf_scalars=True,
    )


@_registry.optimizer("LARS")
def lars(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule = 0.9,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    eeta: _protocol.ScalarOrSchedule = 0.001,
    eps: _protocol.ScalarOrSchedule = 0.0,
    *,
    skip: Sequence[str] = (),
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""LARS: contrib's `LARSOptimizer` (its trust ratio), not `optax.lars`: that is `optax_compat.lars`.

    This is `chain(scale_by_lars(momentum, weight_decay, eeta, eps, skip=skip, nesterov=nesterov),
    scale_by_learning_rate(learning_rate))`; see `scale_by_lars` for the trust ratio. Row-sparse
    gradients take plain momentum with the unscaled rate on their rows.

    Args:
      learning_rate: the base learning rate (number, scalar array or schedule).
      momentum: the momentum, >= 0.
      weight_decay: the weight decay inside the trust ratio, >= 0.
      eeta: the LARS coefficient.
      eps: added to the trust ratio's denominator, >= 0.
      skip: key-path substrings of variables without LARS scaling (TF's `skip_list`).
      nesterov: use the Nesterov form (TF's `use_nesterov`).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "momentum")`.

    Raises:
      ValueError: as contrib: a negative momentum or weight decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lars(1.0, momentum=0.0, weight_decay=0.0, eeta=1.0)
        >>> params = {"w": jnp.array([3.0, 4.0])}
        >>> u, _ = tx.update({"w": jnp.array([0.0, 10.0])}, tx.init(params), params)
        >>> gradtx.apply_updates(params, u)["w"]  # trust ratio |w| / |g| = 0.5
        Array([ 3., -1.], dtype=float32)
    """
    return chain(
        scale_by_lars(momentum, weight_decay, eeta, eps, skip=skip, nesterov=nesterov),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByLarsState", "lars", "scale_by_lars"]
