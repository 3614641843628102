"""Adam's later relatives, as chains in optax's form: AdEMAMix, simplified AdEMAMix, ADOPT, ACProp, AdaMaxW
and optimistic Adam.

Each is the chain of the optax alias of the same name (`optax.contrib` for the first four),
with its defaults and numbers: the building block, then (where the optimizer has one)
`add_decayed_weights` -- weight decay multiplied by the learning rate, optax's order -- then
the learning rate. They are `ElementWise` (unless a weight-decay `mask` is given), and their
epsilon is optax's (outside the root of the bias-corrected second moment).
"""

from __future__ import annotations

from typing import Any, Callable

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain
from gradtx.transforms import (
    scale_by_acprop,
    scale_by_ademamix,
    scale_by_adopt,
    scale_by_bias_corrected_adam,
    scale_by_bias_corrected_adamax,
    scale_by_learning_rate,
    scale_by_optimistic_gradient,
    scale_by_simplified_ademamix,
)
from gradtx.transforms._delayed_moment import adopt_clip_value


@_factory.api
def ademamix(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule = 0.9999,
    alpha: _protocol.ScalarOrSchedule = 5.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdEMAMix: AdamW whose step adds a slow momentum, which remembers gradients over many thousand steps.

    `chain(scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype=mu_dtype),
    add_decayed_weights(weight_decay, mask=mask), scale_by_learning_rate(learning_rate))`: the
    numbers and defaults of `optax.contrib.ademamix`. The paper warms `b3` and `alpha` up with
    schedules (both take one). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the fast first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: decay of the slow first moment, in [0, 1).
      alpha: the weight of the slow moment, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the moments `m1`, `m2` and `nu` (default: each param's dtype).

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m1`, `m2` and `nu`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `alpha`, `eps`, `eps_root`, weight decay
        or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.ademamix(0.1, alpha=0.0, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # alpha 0: Adam's first step, -lr sign(g)
        [-0.1, 0.1]

    References:
      Pagliardini, Ablin, Grangier, *The AdEMAMix optimizer: better, faster, older*, ICLR 2025
      (arXiv:2409.03137).
    """
    return chain(
        scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype=mu_dtype),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def simplified_ademamix(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.99,
    b2: _protocol.ScalarOrSchedule = 0.95,
    alpha: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Simplified AdEMAMix: one undamped momentum plus `alpha` times the gradient, over Adam's root.

    `chain(scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root),
    add_decayed_weights(weight_decay, mask=mask), scale_by_learning_rate(learning_rate))`: the
    numbers and defaults of `optax.contrib.simplified_ademamix`. The momentum is not damped by
    :math:`1-\beta_1`, so the rate is about :math:`1-\beta_1` times Adam's. A row-sparse
    gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      alpha: the weight of the current gradient, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `n`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `alpha`, `eps`, `eps_root`, weight decay
        or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.simplified_ademamix(0.1, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr g / |g|
        [-0.1, 0.1]

    References:
      Morwani, Shapira, Vyas, Malach, Kakade, Janson, *Connections between schedule-free
      optimizers, AdEMAMix, and accelerated SGD variants*, 2025 (arXiv:2502.02431).
    """
    return chain(
        scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def adopt(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.9999,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    *,
    mu_dtype: Any = None,
    nesterov: bool = False,
    use_clipping: bool = True,
    clip_value_fn: Callable[[Any], Any] = adopt_clip_value,
) -> _protocol.GradientTransformation:
    r"""ADOPT: Adam whose gradient is normalised by the second moment of the gradients before it.

    `chain(scale_by_adopt(b1, b2, eps, mu_dtype=mu_dtype, nesterov=nesterov,
    use_clipping=use_clipping, clip_value_fn=clip_value_fn), scale_by_learning_rate(learning_rate))`:
    the numbers and defaults of `optax.contrib.adopt`. The first step moves nothing (it sets
    the second moment); with clipping (the default) the normalised gradient is bounded by
    :math:`(t-1)^{1/4}`. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: the smallest denominator, >= 0.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype).
      nesterov: step along Nesterov's look-ahead of the momentum.
      use_clipping: clip the normalised gradient to `clip_value_fn(count)`.
      clip_value_fn: the clipping bound as a function of the completed steps.

    Returns:
      An `ElementWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adopt(0.1, use_clipping=False)
        >>> params, g = jnp.zeros(2), jnp.array([2.0, -0.5])
        >>> u, state = tx.update(g, tx.init(params), params)
        >>> [round(float(x), 4) for x in tx.update(g, state, params)[0]]  # step 2: -lr (1 - b1) sign(g)
        [-0.01, 0.01]

    References:
      Taniguchi et al., *ADOPT: modified Adam can converge with any beta2 with the optimal
      rate*, NeurIPS 2024 (arXiv:2411.02853).
    """
    return chain(
        scale_by_adopt(
            b1,
            b2,
            eps,
            mu_dtype=mu_dtype,
            nesterov=nesterov,
            use_clipping=use_clipping,
            clip_value_fn=clip_value_fn,
        ),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def acprop(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    eps_root: _protocol.ScalarOrSchedule = 1e-16,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""ACProp: the gradient over the root of AdaBelief's statistic of the gradients before it.

    `chain(scale_by_acprop(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask=mask),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.contrib.acprop`.
    The first step is `-learning_rate * g / (1 + eps)`. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment (which centres the statistic), in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `s`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.acprop(0.1)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr g
        [-0.2, 0.05]

    References:
      Zhuang et al., *Momentum centering and asynchronous update for adaptive gradient
      methods*, NeurIPS 2021 (arXiv:2110.05454).
    """
    return chain(
        scale_by_acprop(b1, b2, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def optimistic_adam(
    learning_rate: _protocol.ScalarOrSchedule,
    *,
    alpha: _protocol.ScalarOrSchedule = 1.0,
    beta: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    mu_dtype: Any = None,
    nesterov: bool = True,
) -> _protocol.GradientTransformation:
    r"""Optimistic Adam: Adam's step extrapolated by its last change, for min-max games.

    `chain(scale_by_bias_corrected_adam(b1, b2, eps, eps_root, nesterov=nesterov,
    mu_dtype=mu_dtype), scale_by_optimistic_gradient(alpha, beta),
    scale_by_learning_rate(learning_rate))`: with :math:`r_t` Adam's step,
    :math:`w \leftarrow w - \eta((\alpha+\beta) r_t - \beta r_{t-1})`. These are the numbers and
    defaults of `optax.optimistic_adam_v2` (Nesterov's first moment by default), and those of
    optax's older `optax.optimistic_adam(learning_rate)`, whose learning rate is the optimistic
    gradient's `alpha` and default `optimism` (`optax_compat.optimistic_adam` takes its
    arguments). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      alpha: the weight of Adam's step, finite.
      beta: the weight of the step's change (the optimism), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype).
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` chain; its slots are `m`, `v` and `previous_gradient`.

    Raises:
      ValueError: for a `b1` / `b2` outside [0, 1), a negative `eps`, `eps_root`, `beta` or rate, or
        a non-finite `alpha` or `beta`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.optimistic_adam(0.1, eps=0.0, nesterov=False)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: alpha times Adam's, -lr sign(g)
        [-0.1, 0.1]

    References:
      Daskalakis, Ilyas, Syrgkanis, Zeng, *Training GANs with optimism*, ICLR 2018.
    """
    return chain(
        scale_by_bias_corrected_adam(b1, b2, eps, eps_root, nesterov=nesterov, mu_dtype=mu_dtype),
        scale_by_optimistic_gradient(alpha, beta),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def adamaxw(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdaMaxW: optax's AdaMax (infinity-norm Adam, bias-corrected) with weight decay multiplied by the rate.

    `chain(scale_by_bias_corrected_adamax(b1, b2, eps), add_decayed_weights(weight_decay,
    mask=mask), scale_by_learning_rate(learning_rate))`: the numbers and defaults of
    `optax.adamaxw` (`weight_decay=0` gives `optax.adamax`). Not `gradtx.adamax`, which is
    tf.contrib's AdaMax (`ApplyAdaMax`: epsilon inside the max). A row-sparse gradient is
    densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to the infinity norm, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adamaxw(0.1, eps=0.0, weight_decay=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr sign(g)
        [-0.1, 0.1]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (section 7.1);
      Loshchilov, Hutter, *Decoupled weight decay regularization*, ICLR 2019.
    """
    return chain(
        scale_by_bias_corrected_adamax(b1, b2, eps),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )
