"""optax's learning-rate-free optimizers under optax's names, signatures, defaults and state classes (2/2).

`optax.contrib`'s `dog` and `dowg` (and their blocks `scale_by_dog`, `scale_by_dowg`, which optax
keeps in `optax.contrib._dog` without exporting them), and top-level optax's
`scale_by_distance_over_gradients`, `scale_by_polyak` and `polyak_sgd`: gradtx's rules in
optax's state layouts and chains. No math here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import gradtx
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.tree_rule import restated_tree
from gradtx.optax_compat import _aliases as A
from gradtx.optax_compat import _combinators as C
from gradtx.optax_compat import _scalings as S


class DoGState(NamedTuple):
    """State of `scale_by_dog` (optax's layout)."""

    is_init_step: jax.Array
    init_params: _protocol.Updates
    max_dist: jax.Array
    sum_sq_norm_grads: jax.Array


class DoWGState(NamedTuple):
    """State of `scale_by_dowg` (optax's layout)."""

    init_params: _protocol.Updates
    weighted_sq_norm_grads: jax.Array
    estim_sq_dist: jax.Array


@_factory.api
def scale_by_dog(init_step: tuple[str, Any], eps: Any = 1e-8) -> _protocol.GradientTransformation:
    """optax's `scale_by_dog` (`optax.contrib._dog`'s; unexported): `gradtx.scale_by_dog` in `DoGState`.

    `init_step` is required, as in optax.

    Args:
      init_step: `(kind, value)`: "distance", "learning_rate" or "heuristic", and its value.
      eps: added to the gradient sum under the root.

    Returns:
      A transform with state `DoGState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free_distance import scale_by_dog
        >>> float(scale_by_dog(("distance", 0.5)).init(jnp.zeros(2)).max_dist)
        0.5
    """
    return restated_tree(gradtx.scale_by_dog(init_step, eps), DoGState, {})


@_factory.api
def scale_by_dowg(init_estim_sq_dist: Any = None, eps: Any = 1e-4) -> _protocol.GradientTransformation:
    """optax's `scale_by_dowg` (`optax.contrib._dog`'s; unexported): `gradtx.scale_by_dowg` in `DoWGState`.

    Args:
      init_estim_sq_dist: the initial guess of the squared distance to the solution; None: `eps`.
      eps: added to the denominator.

    Returns:
      An `ElementWise` transform with state `DoWGState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free_distance import scale_by_dowg
        >>> scale_by_dowg().init(jnp.zeros(2))._fields
        ('init_params', 'weighted_sq_norm_grads', 'estim_sq_dist')
    """
    return restated_tree(gradtx.scale_by_dowg(init_estim_sq_dist, eps), DoWGState, {})


def _decay(weight_decay: Any, mask: Any) -> _protocol.GradientTransformation:
    return gradtx.identity() if weight_decay is None else C.add_decayed_weights(weight_decay, mask)


@_factory.api
def dog(
    learning_rate: Any = 1.0,
    init_step: tuple[str, Any] = ("heuristic", 1e-6),
    eps: Any = 1e-8,
    weight_decay: Any = None,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    """optax's `contrib.dog`: `chain(add_decayed_weights(weight_decay, mask) or identity(),
    scale_by_dog(init_step, eps), scale_by_learning_rate(learning_rate))`, member for member.

    Args:
      learning_rate: multiplies DoG's step size.
      init_step: `(kind, value)`, the first step's setting.
      eps: added to the gradient sum under the root.
      weight_decay: added to the gradient as `weight_decay * params`; None: no decay.
      mask: which parameters decay.

    Returns:
      The chain.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free_distance import dog
        >>> type(dog().init(jnp.ones(2))[1]).__name__
        'DoGState'
    """
    return gradtx.chain(
        _decay(weight_decay, mask), scale_by_dog(init_step, eps), S.scale_by_learning_rate(learning_rate)
    )


@_factory.api
def dowg(
    learning_rate: Any = 1.0,
    init_estim_sq_dist: Any = None,
    eps: Any = 1e-4,
    weight_decay: Any = None,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    """optax's `contrib.dowg`: `chain(add_decayed_weights(weight_decay, mask) or identity(),
    scale_by_dowg(init_estim_sq_dist, eps), scale_by_learning_rate(learning_rate))`, member for member.

    Args:
      learning_rate: multiplies DoWG's step size.
      init_estim_sq_dist: the initial guess of the squared distance to the solution; None: `eps`.
      eps: added to the denominator.
      weight_decay: added to the gradient as `weight_decay * params`; None: no decay.
      mask: which parameters decay.

    Returns:
      The chain.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free_distance import dowg
        >>> type(dowg().init(jnp.ones(2))[1]).__name__
        'DoWGState'
    """
    return gradtx.chain(
        _decay(weight_decay, mask),
        scale_by_dowg(init_estim_sq_dist, eps),
        S.scale_by_learning_rate(learning_rate),
    )


@_factory.api
def scale_by_distance_over_gradients(
    reps_rel: Any = 1e-6, eps: Any = 1e-8, param_dtype: Any = jnp.float32, global_scale: Any = 1.0
) -> _protocol.GradientTransformation:
    """optax's `scale_by_distance_over_gradients`: `gradtx.scale_by_distance_over_gradients` (optax's state).

    Args:
      reps_rel: the initial distance relative to each leaf's norm.
      eps: added to the gradient sum under the root.
      param_dtype: the dtype the initial params are kept in.
      global_scale: multiplies every step (typically 1 or -1).

    Returns:
      A `LeafWise` transform with state `ScaleByDistanceOverGradientsState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free_distance import scale_by_distance_over_gradients
        >>> scale_by_distance_over_gradients().init(jnp.zeros(2))._fields
        ('max_dist', 'grad_sum_of_squares', 'init_params')
    """
    return gradtx.scale_by_distance_over_gradients(reps_rel, eps, global_scale, param_dtype=param_dtype)


ScaleByDistanceOverGradientsState = gradtx.ScaleByDistanceOverGradientsState


scale_by_polyak = gradtx.scale_by_polyak
"""optax's `scale_by_polyak` is gradtx's: the same signature, defaults, numbers and state (`EmptyState()`)."""


@_factory.api
def polyak_sgd(
    max_learning_rate: Any = 1.0,
    scaling: Any = 1.0,
    f_min: Any = 0.0,
    eps: Any = 0.0,
    variant: str = "sps",
) -> _protocol.GradientTransformation:
    """optax's `polyak_sgd`: `chain(sgd(learning_rate=scaling), scale_by_polyak(...))`, member for member.

    Args:
      max_learning_rate: the largest step size.
      scaling: the learning rate of the `sgd` before the step size.
      f_min: a lower bound of the loss.
      eps: added to the squared norm.
      variant: "sps" or "sps+".

    Returns:
      The chain; its `update` needs the extra argument `value`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import polyak_sgd
        >>> len(polyak_sgd().init(jnp.zeros(2)))
        2
    """
    _checks.check_nonnegative("polyak_sgd", "scaling", scaling)  # before `sgd` names it `learning_rate`
    return gradtx.chain(A.sgd(learning_rate=scaling), scale_by_polyak(f_min, max_learning_rate, eps, variant))
