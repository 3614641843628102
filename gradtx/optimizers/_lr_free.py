"""Learning-rate-free optimizers (optax's numbers): Prodigy, D-Adapted AdamW, COCOB, DoG, DoWG, Polyak SGD.

Each estimates its own step size (a distance to the solution, a bet, the Polyak gap); a
`learning_rate` where they take one is a schedule around 1. No math here.
"""

from __future__ import annotations

from typing import Any

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain, identity
from gradtx.transforms import (
    scale,
    scale_by_cocob,
    scale_by_dadapt_adamw,
    scale_by_dog,
    scale_by_dowg,
    scale_by_learning_rate,
    scale_by_polyak,
    scale_by_prodigy,
)


@_factory.api
def prodigy(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    b3: _protocol.ScalarOrSchedule | None = None,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    estim_lr0: _protocol.ScalarOrSchedule = 1e-6,
    estim_lr_coef: _protocol.ScalarOrSchedule = 1.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    safeguard_warmup: bool = False,
) -> _protocol.GradientTransformation:
    r"""Prodigy: AdamW whose rate is a distance estimate grown from the gradients (`optax.contrib.prodigy`).

    `scale_by_prodigy(...)` itself: the rate and the decay act inside the estimate, so the
    building block is the whole optimizer (its state is `ScaleByProdigyState`). Give
    `learning_rate` as a schedule around 1 (e.g. a cosine decay from 1 to 0 with a warmup).

    Args:
      learning_rate: a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: decay of the estimate's sums, in [0, 1]; None: `sqrt(b2)`.
      eps: added to the root of the second moment (times the estimate), >= 0.
      estim_lr0: the initial (under-)estimate of the rate, > 0.
      estim_lr_coef: multiplies each new estimate, > 0.
      weight_decay: decoupled decay (times the estimated rate), >= 0.
      safeguard_warmup: leave the rate out of the estimate's denominator (for warmups).

    Returns:
      An `ElementWise` transform with state `ScaleByProdigyState(count, m, v, s, x0, d, r)`.

    Raises:
      ValueError: for a bad rate, beta, epsilon, estimate or decay.
      TypeError: for a non-bool `safeguard_warmup`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.prodigy(weight_decay=1e-3)
        >>> params = {"w": jnp.array([1.0, -2.0])}
        >>> state = tx.init(params)
        >>> u, state = tx.update(params, state, params)
        >>> sorted(gradtx.slot_names(state))
        ['m', 's', 'v', 'x0']

    References:
      Mishchenko, Defazio, *Prodigy: an expeditiously adaptive parameter-free learner*,
      ICML 2024 (arXiv:2306.06101).
    """
    return scale_by_prodigy(
        learning_rate,
        b1,
        b2,
        b3,
        eps,
        estim_lr0,
        estim_lr_coef,
        weight_decay,
        safeguard_warmup=safeguard_warmup,
    )


@_factory.api
def dadapt_adamw(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    estim_lr0: _protocol.ScalarOrSchedule = 1e-6,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""D-Adapted AdamW: AdamW whose rate is a distance estimate (`optax.contrib.dadapt_adamw`).

    `scale_by_dadapt_adamw(...)` itself: the rate and the decay act inside the estimate, so
    the building block is the whole optimizer. Give `learning_rate` as a schedule around 1.

    Args:
      learning_rate: a scale of the estimated rate (a schedule from 1 to 0), >= 0.
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the second moment, >= 0.
      estim_lr0: the initial (under-)estimate of the rate, > 0.
      weight_decay: decoupled decay (times the estimated rate), >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByDAdaptAdamWState(count, m, v, s, d, r)`.

    Raises:
      ValueError: for a bad rate, beta, epsilon, estimate or decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.dadapt_adamw()
        >>> params = {"w": jnp.array([1.0, -2.0])}
        >>> u, state = tx.update(params, tx.init(params), params)
        >>> round(float(state.d), 9)  # the estimate starts at estim_lr0
        1e-06

    References:
      Defazio, Mishchenko, *Learning-rate-free learning by D-adaptation*, ICML 2023
      (arXiv:2301.07733).
    """
    return scale_by_dadapt_adamw(learning_rate, b1, b2, eps, estim_lr0, weight_decay)


@_factory.api
def cocob(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    alpha: _protocol.ScalarOrSchedule = 100.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""COCOB-Backprop: coin betting, no learning rate (`optax.contrib.cocob`).

    `chain(add_decayed_weights(weight_decay, mask=mask), scale(learning_rate),
    scale_by_cocob(alpha, eps))`: the (decayed) gradient, optionally scaled, is what each
    parameter bets with; see `scale_by_cocob`. A row-sparse gradient is densified.

    Args:
      learning_rate: multiplies the gradient before the bet (e.g. a schedule), >= 0.
      alpha: bounds the bet early on, > 0.
      eps: the initial scale of the gradients, > 0.
      weight_decay: added to the gradient as `weight_decay * params`, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (a `LeafWise` one with a `mask`).

    Raises:
      ValueError: for a bad rate, `alpha`, `eps` or decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.cocob(weight_decay=1e-4)
        >>> params = {"w": jnp.array([1.0, -2.0])}
        >>> state = tx.init(params)
        >>> for _ in range(3):
        ...     u, state = tx.update(params, state, params)
        ...     params = gradtx.apply_updates(params, u)
        >>> bool(abs(params["w"][0]) < 1.0)
        True

    References:
      Orabona, Tommasi, *Training deep networks without learning rates through coin
      betting*, NeurIPS 2017 (arXiv:1705.07795).
    """
    _checks.check_learning_rate("cocob", learning_rate)
    return chain(
        add_decayed_weights(weight_decay, mask=mask), scale(learning_rate), scale_by_cocob(alpha, eps)
    )


def _decay(weight_decay: Any, mask: Any) -> _protocol.GradientTransformation:
    """`add_decayed_weights(weight_decay, mask=mask)`, or `identity()` for no decay (None), as optax's DoG."""
    return identity() if weight_decay is None else add_decayed_weights(weight_decay, mask=mask)


@_factory.api
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


@_factory.api
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


@_factory.api
def polyak_sgd(
    max_learning_rate: _protocol.ScalarOrSchedule = 1.0,
    scaling: _protocol.ScalarOrSchedule = 1.0,
    f_min: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 0.0,
    variant: str = "sps",
) -> _protocol.GradientTransformation:
    r"""SGD at Polyak's step size: the loss's gap to `f_min` over the squared gradient norm (optax's numbers).

    `chain(scale_by_learning_rate(scaling), scale_by_polyak(f_min, max_learning_rate, eps,
    variant))`, optax's chain: the step size is computed from the scaled gradient, so
    below the cap the step is :math:`-\frac{f - f^\star}{s \lVert g
    \rVert^2} g` (`scaling`
    :math:`s` divides it), at the cap :math:`-s \gamma_{\max} g`. `update` needs the loss:
    `tx.update(grads, state, params, value=loss)`. A row-sparse gradient is densified.

    Args:
      max_learning_rate: the largest step size, >= 0.
      scaling: multiplies the gradient before the step size is computed, >= 0 (number or schedule).
      f_min: a lower bound of the loss (0 for a model that interpolates the data).
      eps: added to the squared norm, >= 0.
      variant: "sps", or "sps+" (the positive part of the gap).

    Returns:
      An `ElementWise` chain; its `update` needs the extra argument `value`.

    Raises:
      ValueError: for a negative rate, scaling or `eps`, or an unknown variant.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> def f(x):
        ...     return jnp.sum(x**2)
        >>> tx, params = gradtx.polyak_sgd(), jnp.array([1.0, 2.0, 3.0])
        >>> state = tx.init(params)
        >>> for _ in range(2):
        ...     value, grad = jax.value_and_grad(f)(params)
        ...     u, state = tx.update(grad, state, params, value=value)
        ...     params = gradtx.apply_updates(params, u)
        >>> float(f(params))  # 14 / 4 / 4, as optax's documented run
        0.875

    References:
      Loizou, Vaswani, Laradji, Lacoste-Julien, *Stochastic Polyak step-size for SGD: an
      adaptive learning rate for fast convergence*, AISTATS 2021 (arXiv:2002.10542).
    """
    _checks.check_nonnegative("polyak_sgd", "scaling", scaling)
    return chain(scale_by_learning_rate(scaling), scale_by_polyak(f_min, max_learning_rate, eps, variant))
