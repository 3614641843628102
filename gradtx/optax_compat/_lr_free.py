"""optax's learning-rate-free optimizers under optax's names, signatures, defaults and state classes (1/2).

`optax.contrib`'s `prodigy`, `dadapt_adamw`, `mechanize`, `cocob` and `scale_by_cocob`: gradtx's
rules (the formulas are in `gradtx.transforms` and `gradtx.combinators`) in optax's state
layouts, at no cost per step. No math here. DoG, DoWG and Polyak's step size are in
`_lr_free_distance.py`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.rule import restated
from gradtx._core.tree_rule import restated_tree
from gradtx.combinators._mechanic import mechanic_transform
from gradtx.optax_compat import _combinators as C
from gradtx.optax_compat import _scalings as S


class ProdigyState(NamedTuple):
    """State of `prodigy` (optax's layout: the count last)."""

    exp_avg: _protocol.Updates
    exp_avg_sq: _protocol.Updates
    grad_sum: _protocol.Updates
    params0: _protocol.Updates
    estim_lr: jax.Array
    numerator_weighted: jax.Array
    count: _protocol.Count


class DAdaptAdamWState(NamedTuple):
    """State of `dadapt_adamw` (optax's layout: the count last)."""

    exp_avg: _protocol.Updates
    exp_avg_sq: _protocol.Updates
    grad_sum: _protocol.Updates
    estim_lr: jax.Array
    numerator_weighted: jax.Array
    count: _protocol.Count


_D_ADAPT = {"m": "exp_avg", "v": "exp_avg_sq", "s": "grad_sum", "d": "estim_lr", "r": "numerator_weighted"}


@_factory.api
def prodigy(
    learning_rate: Any = 1.0,
    betas: tuple[Any, Any] = (0.9, 0.999),
    beta3: Any = None,
    eps: Any = 1e-8,
    estim_lr0: Any = 1e-6,
    estim_lr_coef: Any = 1.0,
    weight_decay: Any = 0.0,
    safeguard_warmup: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `contrib.prodigy`: `gradtx.prodigy` in `ProdigyState`.

    Args:
      learning_rate: a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      betas: `(b1, b2)`, the decays of the moments.
      beta3: decay of the estimate's sums; None: `sqrt(b2)`.
      eps: added to the root of the second moment (times the estimate).
      estim_lr0: the initial (under-)estimate of the rate.
      estim_lr_coef: multiplies each new estimate.
      weight_decay: decoupled decay (times the estimated rate).
      safeguard_warmup: leave the rate out of the estimate's denominator.

    Returns:
      An `ElementWise` transform with state `ProdigyState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free import prodigy
        >>> prodigy().init(jnp.zeros(2))._fields[-3:]
        ('estim_lr', 'numerator_weighted', 'count')
    """
    b1, b2 = betas
    inner = gradtx.prodigy(
        learning_rate,
        b1,
        b2,
        beta3,
        eps,
        estim_lr0,
        estim_lr_coef,
        weight_decay,
        safeguard_warmup=safeguard_warmup,
    )
    return restated_tree(inner, ProdigyState, {**_D_ADAPT, "x0": "params0"})


@_factory.api
def dadapt_adamw(
    learning_rate: Any = 1.0,
    betas: tuple[Any, Any] = (0.9, 0.999),
    eps: Any = 1e-8,
    estim_lr0: Any = 1e-6,
    weight_decay: Any = 0.0,
) -> _protocol.GradientTransformation:
    """optax's `contrib.dadapt_adamw`: `gradtx.dadapt_adamw` in `DAdaptAdamWState`.

    Args:
      learning_rate: a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      betas: `(b1, b2)`, the decays of the moments.
      eps: added to the root of the second moment.
      estim_lr0: the initial (under-)estimate of the rate.
      weight_decay: decoupled decay (times the estimated rate).

    Returns:
      An `ElementWise` transform with state `DAdaptAdamWState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free import dadapt_adamw
        >>> round(float(dadapt_adamw().init(jnp.zeros(2)).estim_lr), 9)
        1e-06
    """
    b1, b2 = betas
    inner = gradtx.dadapt_adamw(learning_rate, b1, b2, eps, estim_lr0, weight_decay)
    return restated_tree(inner, DAdaptAdamWState, _D_ADAPT)


class MechanicState(NamedTuple):
    """State of `mechanize` (optax's layout)."""

    base_optimizer_state: Any
    count: _protocol.Count
    r: jax.Array
    m: jax.Array
    v: jax.Array
    s: jax.Array
    x0: _protocol.Updates


@_factory.api
def mechanize(
    base_optimizer: Any,
    weight_decay: Any = 1e-2,
    eps: Any = 1e-8,
    s_init: Any = 1e-6,
    num_betas: int = 6,
) -> _protocol.GradientTransformation:
    """optax's `contrib.mechanize`: `gradtx.mechanize` in `MechanicState`.

    Args:
      base_optimizer: the optimizer whose updates are scaled (its rate about 1).
      weight_decay: Mechanic's own decay of the gradient it bets with.
      eps: added to the denominators.
      s_init: the initial scale of each bet.
      num_betas: the number of decays `1 - 10^-i`.

    Returns:
      A transform with state `MechanicState`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> from gradtx.optax_compat._lr_free import mechanize
        >>> mechanize(gradtx.sgd(1.0)).init(jnp.zeros(2))._fields[:2]
        ('base_optimizer_state', 'count')
    """
    fn = "mechanize"
    gradtx.mechanize(base_optimizer, weight_decay, eps, s_init, num_betas)  # the checks
    return mechanic_transform(fn, base_optimizer, weight_decay, eps, s_init, num_betas, MechanicState,
                              "base_optimizer_state")  # fmt: skip


class COCOBState(NamedTuple):
    """State of `scale_by_cocob` (optax's layout: no count)."""

    init_particles: _protocol.Updates
    cumulative_gradients: _protocol.Updates
    scale: _protocol.Updates
    subgradients: _protocol.Updates
    reward: _protocol.Updates


@_factory.api
def scale_by_cocob(alpha: Any = 100.0, eps: Any = 1e-8) -> _protocol.GradientTransformation:
    """optax's `contrib.scale_by_cocob`: `gradtx.scale_by_cocob` in `COCOBState` (no count).

    Args:
      alpha: bounds the bet early on.
      eps: the initial scale of the gradients.

    Returns:
      An `ElementWise` transform with state `COCOBState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free import scale_by_cocob
        >>> scale_by_cocob().init(jnp.zeros(2))._fields[0]
        'init_particles'
    """
    return restated(gradtx.scale_by_cocob(alpha, eps), COCOBState)


@_factory.api
def cocob(
    learning_rate: Any = 1.0,
    alpha: Any = 100.0,
    eps: Any = 1e-8,
    weight_decay: Any = 0.0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    """optax's `contrib.cocob`: `chain(add_decayed_weights(weight_decay, mask), scale_by_learning_rate(lr,
    flip_sign=False), scale_by_cocob(alpha, eps))`, member for member.

    Args:
      learning_rate: multiplies the gradient before the bet.
      alpha: bounds the bet early on.
      eps: the initial scale of the gradients.
      weight_decay: added to the gradient as `weight_decay * params`.
      mask: which parameters decay.

    Returns:
      The chain.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat._lr_free import cocob
        >>> type(cocob().init(jnp.zeros(2))[2]).__name__
        'COCOBState'
    """
    return gradtx.chain(
        C.add_decayed_weights(weight_decay, mask),
        S.scale_by_learning_rate(learning_rate, flip_sign=False),
        scale_by_cocob(alpha, eps),
    )
