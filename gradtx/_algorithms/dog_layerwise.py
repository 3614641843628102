"""Layer-wise DoG (optax's numbers): `scale_by_distance_over_gradients`, each leaf's own DoG step size.

DoG and DoWG, whose step sizes are those of the whole tree, are in `dog.py`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.rule import update_rule


class ScaleByDistanceOverGradientsState(NamedTuple):
    """State of `scale_by_distance_over_gradients` (optax's layout: no count)."""

    max_dist: _protocol.Updates  # one scalar per leaf: its largest distance from its initial value
    grad_sum_of_squares: _protocol.Updates  # one [1] array per leaf: the sum of its squared gradient norms
    init_params: _protocol.Updates  # the initial params (in `param_dtype`)


# one scalar (or [1] array) per leaf: only `init_params` is compared with the params' shapes
setattr(ScaleByDistanceOverGradientsState, "slots_shaped_like_params", ("init_params",))  # noqa: B010


def _ldog_leaf(g, max_dist, sum_sq, x0, w, h):
    """Layer-wise DoG for one leaf: its own distance and gradient sum."""
    max_dist = jnp.maximum(max_dist, jnp.sqrt(jnp.sum(jnp.square(w - x0))))
    sum_sq = sum_sq + jnp.sum(jnp.square(g))
    rate = h.global_scale * (max_dist / jnp.sqrt(sum_sq + h.eps))
    return rate.reshape(()) * g, max_dist, sum_sq, x0


@_registry.transform()
def scale_by_distance_over_gradients(
    reps_rel: float = 1e-6,
    eps: float = 1e-8,
    global_scale: float = 1.0,
    *,
    param_dtype: Any = jnp.float32,
) -> _protocol.GradientTransformation:
    r"""Scale each leaf's update by its own DoG step size (layer-wise DoG), as optax does.

    Per leaf, with :math:`x_0` its initial value and :math:`s` the global scale:

    .. math::
        \bar r_t = \max\big(\bar r_{t-1}, \lVert x_t - x_0 \rVert\big), \quad
        G_t = G_{t-1} + \lVert g_t \rVert^2, \quad
        u_t = s\, \frac{\bar r_t}{\sqrt{G_t + \epsilon}}\, g_t

    with :math:`\bar r_0 = r_{rel} (1 + \lVert x_0 \rVert)`. Unlike `scale_by_dog`, the sign
    is not flipped: give `global_scale=-1.0` for descent, or follow it with
    `scale_by_learning_rate`. The update of a 0-d leaf is 0-d (optax 0.2.8 returns it
    shaped [1]). A per-tensor rule (`LeafWise`); it reads the params; a row-sparse gradient
    is densified.

    Args:
      reps_rel: :math:`r_{rel}`, the initial distance relative to each leaf's norm, > 0.
      eps: :math:`\epsilon`, added to the gradient sum under the root, >= 0.
      global_scale: :math:`s`, multiplies every step (typically 1 or -1).

      (Numbers or scalar arrays, not schedules: optax's state keeps no count.)
      param_dtype: the dtype the initial params are kept in (None: the params').

    Returns:
      A `LeafWise` transform with state
      `ScaleByDistanceOverGradientsState(max_dist, grad_sum_of_squares, init_params)`.

    Raises:
      ValueError: for a non-positive `reps_rel` or a negative `eps`; at update time, if
        `params` is missing.
      TypeError: for a schedule or a non-float `param_dtype`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_distance_over_gradients(reps_rel=0.1, eps=0.0)
        >>> params = {"w": jnp.array([3.0, 4.0])}  # r_0 = 0.1 * (1 + 5)
        >>> u, state = tx.update({"w": jnp.array([0.0, 2.0])}, tx.init(params), params)
        >>> u["w"]  # 0.6 / 2 * g
        Array([0. , 0.6], dtype=float32)

    References:
      Ivgi, Hinder, Carmon, *DoG is SGD's best friend: a parameter-free dynamic step size
      schedule*, ICML 2023 (arXiv:2302.12022), section 5 (layer-wise DoG).
    """
    fn = "scale_by_distance_over_gradients"
    for name, value in (("reps_rel", reps_rel), ("eps", eps), ("global_scale", global_scale)):
        _checks.check_number(fn, name, value)
    _checks.check_positive(fn, "reps_rel", reps_rel)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_float_dtype(fn, "param_dtype", param_dtype)

    def initial_distance(p):
        return _placement.reduced(p, ()) + reps_rel * (1 + jnp.sqrt(jnp.sum(jnp.square(p))))

    def gradient_sum(p):
        return _placement.reduced(p, (), _scalars.at_least_float32(p.dtype)).reshape(1)

    why = "its norms are of real leaves"

    def initial_params(p):
        _factory.refuse_complex(fn, None, p, why=why)  # before `param_dtype` would drop the imaginary part
        return jnp.copy(p if param_dtype is None else p.astype(param_dtype))  # never the params' buffer

    return update_rule(
        fn,
        ScaleByDistanceOverGradientsState,
        _ldog_leaf,
        hyper={"eps": eps, "global_scale": global_scale},
        slots={
            "max_dist": initial_distance,
            "grad_sum_of_squares": gradient_sum,
            "init_params": initial_params,
        },
        reads_params=True,
        count="never",  # optax's layout: no count, so no schedules
        # not `SliceWise`: its per-leaf sum is shaped [1] (optax's layout), which ZeRO's layout cannot tell
        # from a one-element slot (`parallel.shard_state` would pad it instead of repeating it)
        kind=_protocol.LeafWise,
        real_only=why,
    )


__all__ = ["ScaleByDistanceOverGradientsState", "scale_by_distance_over_gradients"]
