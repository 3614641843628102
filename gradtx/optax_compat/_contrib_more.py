"""optax.contrib's remaining names under optax's names, signatures, defaults and state classes:
`split_real_and_imaginary`, `normalize`, differential privacy (`differentially_private_aggregate`, `dpsgd`),
GaLore and schedule-free learning (from `_contrib_schedule_free`).

Each is the gradtx transform of the same algorithm (or the chain optax builds of them), so states read as
optax's (`state.inner_state`, `state.rng_key`, `state.base_optimizer_state`). No math here. These names are
optax's `optax.contrib.*`, not top-level ones: `gradtx.optax_compat.contrib` re-exports them.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax

import gradtx
import gradtx.optax_compat as _optax
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import (
    DifferentiallyPrivateAggregateState,
    GaLoreDimensionNumbers,
    GaLoreState,
    SplitRealAndImaginaryState,
)
from gradtx.optax_compat._contrib_schedule_free import (
    ScheduleFreeState,
    schedule_free,
    schedule_free_adamw,
    schedule_free_eval_params,
    schedule_free_sgd,
)

__all__ = [
    "DifferentiallyPrivateAggregateState",
    "GaLoreDimensionNumbers",
    "GaLoreState",
    "NormalizeState",
    "ScheduleFreeState",
    "SplitRealAndImaginaryState",
    "differentially_private_aggregate",
    "dpsgd",
    "galore",
    "scale_by_galore",
    "schedule_free",
    "schedule_free_adamw",
    "schedule_free_eval_params",
    "schedule_free_sgd",
    "split_real_and_imaginary",
]

NormalizeState = _protocol.EmptyState
"""The state of optax.contrib's `normalize` (`gradtx.normalize`): `EmptyState()`, as optax's."""


def split_real_and_imaginary(inner: Any) -> _protocol.GradientTransformation:
    """optax.contrib's `split_real_and_imaginary`: `gradtx.split_real_and_imaginary(inner)`.

    Args:
      inner: the transform to run on the real and imaginary parts as real parameters.

    Returns:
      A `GradientTransformation` with state `SplitRealAndImaginaryState(inner_state)`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> from gradtx.optax_compat import _contrib_more as contrib
        >>> tx = contrib.split_real_and_imaginary(optax.sgd(0.5))
        >>> params = jnp.array([1.0 + 1.0j])
        >>> tx.update(jnp.array([2.0 - 4.0j]), tx.init(params), params)[0]
        Array([-1.+2.j], dtype=complex64)
    """
    return gradtx.split_real_and_imaginary(inner)


def differentially_private_aggregate(
    l2_norm_clip: Any, noise_multiplier: Any, key: Any = None, *, seed: int | None = None
) -> _protocol.GradientTransformation:
    """optax.contrib's `differentially_private_aggregate`: `gradtx.differentially_private_aggregate(...,
    key=key)`, the noise drawn from optax's key chain.

    `key` is a typed PRNG key or an int seed; None warns and uses `jax.random.key(0)`, and the
    deprecated `seed` warns and gives `jax.random.key(seed)`, as optax 0.2.8 does.

    Args:
      l2_norm_clip: the largest global norm of one example's gradient.
      noise_multiplier: the noise's standard deviation relative to `l2_norm_clip`.
      key: the PRNG key (or int seed) of the noise.
      seed: deprecated: the int seed of the noise (give `key`).

    Returns:
      A `GradientTransformation` with state `DifferentiallyPrivateAggregateState(rng_key)`; its
      updates are per-example gradients, every leaf `[batch, *param_shape]`.

    Raises:
      ValueError: if both `key` and `seed` are given, or for a negative or non-finite argument.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from gradtx.optax_compat import _contrib_more as contrib
        >>> tx = contrib.differentially_private_aggregate(1.0, 0.0, key=jax.random.key(0))
        >>> per_example = {"w": jnp.array([[3.0, 4.0], [0.3, 0.4]])}  # norms 5 and 0.5
        >>> [round(float(v), 4) for v in tx.update(per_example, tx.init(None))[0]["w"]]
        [0.45, 0.6]
    """
    if seed is not None:
        warnings.warn(
            '"seed" is deprecated and will be removed in optax 0.2.7, use "key".',
            DeprecationWarning,
            stacklevel=2,
        )
        if key is not None:
            raise ValueError("`differentially_private_aggregate`: give only one of `seed` and `key`.")
        key = jax.random.key(seed)
    if key is None:
        warnings.warn("Specifying a key will be required in optax 0.2.7.", stacklevel=2)
        key = jax.random.key(0)
    if not (isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)):
        key = jax.random.key(key)  # optax's `canonicalize_key`: an int seed
    return gradtx.differentially_private_aggregate(l2_norm_clip, noise_multiplier, key=key)


@_factory.api
@_factory.per_example_grads
def dpsgd(
    learning_rate: Any,
    l2_norm_clip: Any,
    noise_multiplier: Any,
    seed: int,
    momentum: Any = None,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    """optax.contrib's `dpsgd`: `chain(differentially_private_aggregate(l2_norm_clip, noise_multiplier,
    key=jax.random.key(seed)), trace(momentum, nesterov) or identity(), scale_by_learning_rate(lr))`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      l2_norm_clip: the largest global norm of one example's gradient.
      noise_multiplier: the noise's standard deviation relative to `l2_norm_clip`.
      seed: the int seed of the noise's PRNG key.
      momentum: the decay of the momentum (optax's `trace`); None: no momentum.
      nesterov: Nesterov's momentum.

    Returns:
      A `GradientTransformation` with state `(DifferentiallyPrivateAggregateState(rng_key),
      TraceState(trace) or EmptyState(), EmptyState())`; its updates are per-example gradients.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _contrib_more as contrib
        >>> tx = contrib.dpsgd(0.5, l2_norm_clip=1.0, noise_multiplier=0.0, seed=0)
        >>> tx.update({"w": jnp.array([[3.0, 4.0]])}, tx.init(None))[0]["w"]  # -0.5 [0.6, 0.8]
        Array([-0.3, -0.4], dtype=float32)
    """
    return _optax.chain(
        gradtx.differentially_private_aggregate(l2_norm_clip, noise_multiplier, key=jax.random.key(seed)),
        _optax.trace(decay=momentum, nesterov=nesterov) if momentum is not None else _optax.identity(),
        _optax.scale_by_learning_rate(learning_rate),
    )


@_factory.api
def scale_by_galore(
    rank: int = 128,
    update_proj_gap: int = 200,
    scale: float = 1.0,
    base_optimizer: Any = None,
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `scale_by_galore`: `gradtx.scale_by_galore`, optax's default base (`scale_by_adam`).

    Args:
      rank: the rank of the projection (an int >= 1; capped at each matrix's sides).
      update_proj_gap: the steps between renewals of the projectors (an int >= 1).
      scale: multiplies the projected-back steps.
      base_optimizer: the transform run in the low-rank space; None: `scale_by_adam()` (optax's
        state `ScaleByAdamState(count, mu, nu)`).
      weight_dimension_numbers: which axes form each parameter's matrix (`GaLoreDimensionNumbers`).

    Returns:
      A `GradientTransformation` with state `GaLoreState(count, base_optimizer_state, projector)`.

    Raises:
      TypeError: for a non-int `rank` or `update_proj_gap`.
      ValueError: for `rank` or `update_proj_gap` < 1.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _contrib_more as contrib
        >>> tx = contrib.scale_by_galore(rank=1)
        >>> state = tx.init({"w": jnp.ones((3, 2)), "b": jnp.ones(2)})
        >>> state.base_optimizer_state.mu["w"].shape, state.projector["w"].shape
        ((1, 2), (3, 1))
    """
    base = _optax.scale_by_adam() if base_optimizer is None else base_optimizer
    return gradtx.scale_by_galore(rank, update_proj_gap, scale, base, weight_dimension_numbers)


@_factory.api
def galore(
    learning_rate: Any,
    rank: int = 128,
    update_proj_gap: int = 200,
    scale: float = 1.0,
    base_optimizer: Any = None,
    weight_decay: Any = 0.0,
    mask: Any = None,
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `galore`: `chain(scale_by_galore(...), add_decayed_weights(weight_decay, mask),
    scale_by_learning_rate(learning_rate))`, optax's chain (`gradtx.galore`'s numbers).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      rank: the rank of the projection (an int >= 1; capped at each matrix's sides).
      update_proj_gap: the steps between renewals of the projectors (an int >= 1).
      scale: multiplies the projected-back steps.
      base_optimizer: the transform run in the low-rank space; None: `scale_by_adam()`.
      weight_decay: the decoupled weight decay (multiplied by the rate).
      mask: which parameters decay (a tree of bools or a function of the params); all if None.
      weight_dimension_numbers: which axes form each parameter's matrix (`GaLoreDimensionNumbers`).

    Returns:
      A `GradientTransformation` with state `(GaLoreState, AddDecayedWeightsState, EmptyState)`.

    Raises:
      TypeError: for a non-int `rank` or `update_proj_gap`.
      ValueError: for `rank` or `update_proj_gap` < 1, or a bad rate or weight decay.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _contrib_more as contrib
        >>> tx = contrib.galore(learning_rate=0.1, rank=1)
        >>> params = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
        >>> [round(float(v), 4) for v in tx.update(params, tx.init(params), params)[0]["b"]]  # -lr sign(g)
        [-0.1, -0.1]
    """
    return _optax.chain(
        scale_by_galore(rank, update_proj_gap, scale, base_optimizer, weight_dimension_numbers),
        _optax.add_decayed_weights(weight_decay, mask),
        _optax.scale_by_learning_rate(learning_rate),
    )
