"""DoG and DoWG (optax's numbers).

Layer-wise DoG is in `dog_layerwise.py`, whose names this module re-exports.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._algorithms.dog_layerwise import (
    ScaleByDistanceOverGradientsState as ScaleByDistanceOverGradientsState,
)
from gradtx._algorithms.dog_layerwise import (
    scale_by_distance_over_gradients as scale_by_distance_over_gradients,
)
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import sq_norm
from gradtx._core.rule import TREE_SCALARS, update_rule
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._stateless import identity
from gradtx.combinators._weight_decay import add_decayed_weights

INIT_STEPS = ("distance", "learning_rate", "heuristic")
"""How `scale_by_dog`'s first step is set: its `init_step[0]`."""


class ScaleByDoGState(NamedTuple):
    """State of `scale_by_dog` (optax's `DoGState` holds the same)."""

    is_init_step: jax.Array  # bool: no step taken yet
    init_params: _protocol.Updates  # the initial params x_0
    max_dist: jax.Array  # the largest distance from x_0 so far (starts at r_eps)
    sum_sq_norm_grads: jax.Array  # the sum of the gradients' squared norms


class ScaleByDoWGState(NamedTuple):
    """State of `scale_by_dowg` (optax's `DoWGState` holds the same)."""

    init_params: _protocol.Updates  # the initial params x_0
    weighted_sq_norm_grads: jax.Array  # the sum of the squared gradient norms, each times r_t^2
    estim_sq_dist: jax.Array  # r_t^2, the largest squared distance from x_0 so far


def _distance(x0s, ws):
    return sq_norm([x0 - w for x0, w in zip(x0s, ws, strict=True)])


def _dog_step(gs, x0s, ws, h, *, init_step):
    max_dist = jnp.maximum(h.max_dist, jnp.sqrt(_distance(x0s, ws)))
    sum_sq = h.sum_sq_norm_grads + sq_norm(gs)
    rate = max_dist / jnp.sqrt(sum_sq + h.eps)
    if init_step[0] == "learning_rate":
        rate = jnp.where(h.is_init_step, init_step[1], rate)
    new = {"max_dist": max_dist, "sum_sq_norm_grads": sum_sq, "is_init_step": jnp.zeros((), bool)}
    return [rate * g for g in gs], x0s, new


def _dog_r_eps(h, *, init_step):
    kind, value = init_step
    if kind == "distance":
        return value
    if kind == "heuristic":
        return value * (1 + jnp.sqrt(sq_norm(h.params))) if h.params else value
    return 0.0


@_registry.transform()
def scale_by_dog(
    init_step: tuple[str, Any] = ("heuristic", 1e-6), eps: float = 1e-8
) -> _protocol.GradientTransformation:
    r"""Scale the updates by DoG's step size: the largest distance travelled over the root gradient sum.

    With :math:`x_0` the initial params and the norms over every element of every leaf:

    .. math::
        \bar r_t = \max\big(\bar r_{t-1}, \lVert x_t - x_0 \rVert\big), \quad
        G_t = G_{t-1} + \lVert g_t \rVert^2, \quad
        u_t = \frac{\bar r_t}{\sqrt{G_t + \epsilon}}\, g_t

    :math:`\bar r_0` (:math:`r_\epsilon`) is set by `init_step = (kind, value)`: "distance"
    gives `value`; "heuristic" :math:`\text{value}\,(1 + \lVert x_0 \rVert)` (the authors
    suggest 1e-6, or 1e-4 with batch norm), read from the params `init` is given, so give
    it the real ones; "learning_rate" makes the first step size `value` itself. Follow it
    with `scale_by_learning_rate` (`dog` does). The numbers of `optax.contrib.scale_by_dog`.
    It reads the params; a row-sparse gradient is densified. `ElementWise`, except with the
    "heuristic" start: its `init` reads the whole params' norm, `SliceWise` then (on ZeRO's
    slices, `parallel.sharded_state` in `shard_map`, that norm is the whole params' too).

    Args:
      init_step: `(kind, value)`: kind one of "distance", "learning_rate", "heuristic";
        value a number >= 0.
      eps: :math:`\epsilon`, added to the gradient sum under the root, >= 0 (a number: the
        state keeps no count for a schedule).

    Returns:
      A transform with state `ScaleByDoGState(is_init_step, init_params, max_dist, sum_sq_norm_grads)`.

    Raises:
      ValueError: for an unknown kind, a negative value or `eps`; at update time, if
        `params` is missing.
      TypeError: for an `init_step` that is not a `(kind, value)` pair.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_dog(("distance", 0.5))
        >>> params = jnp.array([3.0, 4.0])
        >>> u, state = tx.update(jnp.array([0.0, 1.0]), tx.init(params), params)
        >>> u  # 0.5 / sqrt(1 + 1e-8) * g
        Array([0. , 0.5], dtype=float32)

    References:
      Ivgi, Hinder, Carmon, *DoG is SGD's best friend: a parameter-free dynamic step size
      schedule*, ICML 2023 (arXiv:2302.12022).
    """
    fn = "scale_by_dog"
    if not isinstance(init_step, (tuple, list)) or len(init_step) != 2:
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `init_step` must be a pair (kind, value), e.g. ('heuristic', 1e-6); "
            f"got {init_step!r}."
        )
    kind, value = init_step
    _checks.check_one_of(fn, "init_step[0]", kind, INIT_STEPS)
    _checks.check_number(fn, "init_step[1]", value)
    _checks.check_nonnegative(fn, "init_step[1]", value)
    _checks.check_number(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    init_step = (kind, value)
    return update_rule(
        fn,
        ScaleByDoGState,
        functools.partial(_dog_step, init_step=init_step),
        hyper={"eps": eps},
        slots={"init_params": jnp.copy},
        scalars={
            "is_init_step": lambda h: True,
            "max_dist": functools.partial(_dog_r_eps, init_step=init_step),
            "sum_sq_norm_grads": lambda h: 0.0,
        },
        kind=_protocol.SliceWise if kind == "heuristic" else _protocol.ElementWise,
        count="never",
        **{**TREE_SCALARS, "real_only": None},  # a real step size times the gradient: complex leaves turn
    )


def _dowg_step(gs, x0s, ws, h):
    estim_sq_dist = jnp.maximum(h.estim_sq_dist, _distance(x0s, ws))
    weighted = estim_sq_dist * sq_norm(gs) + h.weighted_sq_norm_grads
    rate = estim_sq_dist / (jnp.sqrt(weighted) + h.eps)
    return [rate * g for g in gs], x0s, {"estim_sq_dist": estim_sq_dist, "weighted_sq_norm_grads": weighted}


@_registry.transform()
def scale_by_dowg(
    init_estim_sq_dist: float | None = None, eps: float = 1e-4
) -> _protocol.GradientTransformation:
    r"""Scale the updates by DoWG's step size: distance over gradients weighted by the distances.

    With :math:`x_0` the initial params and the norms over every element of every leaf:

    .. math::
        \bar r_t^2 = \max\big(\bar r_{t-1}^2, \lVert x_t - x_0 \rVert^2\big), \quad
        v_t = v_{t-1} + \bar r_t^2 \lVert g_t \rVert^2, \quad
        u_t = \frac{\bar r_t^2}{\sqrt{v_t} + \epsilon}\, g_t

    Follow it with `scale_by_learning_rate` (`dowg` does). The numbers of
    `optax.contrib.scale_by_dowg`. It reads the params; a row-sparse gradient is densified;
    `ElementWise` (every reduction over all elements together).

    Args:
      init_estim_sq_dist: :math:`\bar r_0^2`, the initial guess of the squared distance to
        the solution, >= 0; None: `eps`.
      eps: :math:`\epsilon`, added to the denominator (and the default guess), >= 0 (a number).

    Returns:
      An `ElementWise` transform with state
      `ScaleByDoWGState(init_params, weighted_sq_norm_grads, estim_sq_dist)`.

    Raises:
      ValueError: for a negative guess or `eps`; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_dowg(init_estim_sq_dist=4.0, eps=0.0)
        >>> params = jnp.array([3.0, 4.0])
        >>> u, state = tx.update(jnp.array([0.0, 1.0]), tx.init(params), params)
        >>> u  # 4 / sqrt(4 * 1) * g
        Array([0., 2.], dtype=float32)

    References:
      Khaled, Mishchenko, Jin, *DoWG unleashed: an efficient universal parameter-free
      gradient descent method*, NeurIPS 2023 (arXiv:2305.16284).
    """
    fn = "scale_by_dowg"
    _checks.check_number(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    if init_estim_sq_dist is not None:
        _checks.check_number(fn, "init_estim_sq_dist", init_estim_sq_dist)
        _checks.check_nonnegative(fn, "init_estim_sq_dist", init_estim_sq_dist)
    guess = eps if init_estim_sq_dist is None else init_estim_sq_dist
    return update_rule(
        fn,
        ScaleByDoWGState,
        _dowg_step,
        hyper={"eps": eps},
        slots={"init_params": jnp.copy},
        scalars={"weighted_sq_norm_grads": lambda h: 0.0, "estim_sq_dist": lambda h: guess},
        count="never",
        **{**TREE_SCALARS, "real_only": None},
    )


def _decay(weight_decay: Any, mask: Any) -> _protocol.GradientTransformation:
    """`add_decayed_weights(weight_decay, mask=mask)`, or `identity()` for no decay (None), as optax's DoG."""
    return identity() if weight_decay is None else add_decayed_weights(weight_decay, mask=mask)


@_registry.optimizer("DoG")
def dog(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    init_step: tuple[str, Any] = ("heuristic", 1e-6),
    eps: float = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule | None = None,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""DoG: SGD at the step size distance travelled over root gradient sum (`optax.contrib.dog`).

    `chain(add_decayed_weights(weight_decay, mask=mask) or identity(), scale_by_dog(init_step,
    eps), scale_by_learning_rate(learning_rate))`; see `scale_by_dog`. Keep `learning_rate`
    at 1 (or a schedule around it); the authors recommend averaging the iterates
    (`gradtx.moving_average`). `init` must be given the real initial params (the
    "heuristic" start reads their norm). A row-sparse gradient is densified.

    Args:
      learning_rate: multiplies DoG's step size, >= 0.
      init_step: `(kind, value)`, the first step's setting: "distance", "learning_rate" or
        "heuristic" (see `scale_by_dog`).
      eps: added to the gradient sum under the root, >= 0.
      weight_decay: added to the gradient as `weight_decay * params`, >= 0; None: no decay.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      A chain with state `(decay or EmptyState(), ScaleByDoGState, scale_by_learning_rate's)`.

    Raises:
      ValueError: for a bad rate, `init_step`, `eps` or decay.
      TypeError: for an `init_step` that is not a pair.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.dog()
        >>> params = jnp.array([1.0, 2.0, 3.0])
        >>> state = tx.init(params)
        >>> for _ in range(20):
        ...     u, state = tx.update(2 * params, state, params)  # the gradient of |w|^2
        ...     params = gradtx.apply_updates(params, u)
        >>> bool(jnp.sum(params**2) < 14.0)
        True

    References:
      Ivgi, Hinder, Carmon, *DoG is SGD's best friend: a parameter-free dynamic step size
      schedule*, ICML 2023 (arXiv:2302.12022).
    """
    return chain(
        _decay(weight_decay, mask), scale_by_dog(init_step, eps), scale_by_learning_rate(learning_rate)
    )


@_registry.optimizer("DoWG")
def dowg(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    init_estim_sq_dist: float | None = None,
    eps: float = 1e-4,
    weight_decay: _protocol.ScalarOrSchedule | None = None,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""DoWG: SGD at the step size of distance over distance-weighted gradients (`optax.contrib.dowg`).

    `chain(add_decayed_weights(weight_decay, mask=mask) or identity(),
    scale_by_dowg(init_estim_sq_dist, eps), scale_by_learning_rate(learning_rate))`; see
    `scale_by_dowg`. Keep `learning_rate` at 1 (or a schedule around it). A row-sparse
    gradient is densified.

    Args:
      learning_rate: multiplies DoWG's step size, >= 0.
      init_estim_sq_dist: the initial guess of the squared distance to the solution, >= 0;
        None: `eps`.
      eps: added to the denominator, >= 0.
      weight_decay: added to the gradient as `weight_decay * params`, >= 0; None: no decay.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      A chain with state `(decay or EmptyState(), ScaleByDoWGState, scale_by_learning_rate's)`.

    Raises:
      ValueError: for a bad rate, guess, `eps` or decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.dowg()
        >>> params = jnp.array([1.0, 2.0, 3.0])
        >>> state = tx.init(params)
        >>> for _ in range(5):
        ...     u, state = tx.update(2 * params, state, params)  # the gradient of |w|^2
        ...     params = gradtx.apply_updates(params, u)
        >>> round(float(jnp.sum(params**2)), 3)  # optax's documented 13.268837
        13.269

    References:
      Khaled, Mishchenko, Jin, *DoWG unleashed: an efficient universal parameter-free
      gradient descent method*, NeurIPS 2023 (arXiv:2305.16284).
    """
    return chain(
        _decay(weight_decay, mask),
        scale_by_dowg(init_estim_sq_dist, eps),
        scale_by_learning_rate(learning_rate),
    )


__all__ = [
    "ScaleByDoGState",
    "ScaleByDoWGState",
    "dog",
    "dowg",
    "scale_by_dog",
    "scale_by_dowg",
]
