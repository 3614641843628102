"""Sign-based element-wise optimizers after TF1, as chains in optax's form: Lion, signSGD, Signum and Rprop.

Each moves every element by a step that does not depend on its gradient's size: the
learning rate (Lion, signSGD, Signum) or a step size of its own (Rprop); the gradient
gives the direction only. Each is the chain of the optax alias of the same name, with
its defaults; they are `ElementWise` (unless Lion's weight-decay `mask` is given), so
they run on packed parameters as they are.
"""

from __future__ import annotations

from typing import Any

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain
from gradtx.transforms import (
    ema,
    scale_by_learning_rate,
    scale_by_lion,
    scale_by_rprop,
    scale_by_sign,
)

_DESCEND = 1.0
"""The rate of Rprop's last link: its step sizes are the rates; the link only turns the step into an update
(the sign)."""


@_factory.api
def lion(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.99,
    weight_decay: _protocol.ScalarOrSchedule = 1e-3,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Lion: every element moves by the learning rate, along the sign of an interpolated momentum.

    `chain(scale_by_lion(b1, b2, mu_dtype=mu_dtype), add_decayed_weights(weight_decay,
    mask=mask), scale_by_learning_rate(learning_rate))`: the numbers and defaults of
    `optax.lion`. Its only slot is the momentum `m`. Take a rate 3-10x smaller than AdamW's
    and a weight decay 3-10x larger. A row-sparse gradient is densified. A gradient of
    +-inf leaves `m` infinite for good: the params stay finite but that element moves by the
    rate in one direction whatever the later gradients (NaN reaches the params); wrap in
    `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: the weight of the momentum in the update's direction, in [0, 1].
      b2: decay of the momentum, in [0, 1].
      weight_decay: added to the sign as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the momentum `m` (default: each param's dtype).

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slot is `m`.

    Raises:
      ValueError: for a beta outside [0, 1], or a negative weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lion(0.1, weight_decay=0.0)
        >>> params = jnp.zeros(3)
        >>> tx.update(jnp.array([0.5, -1e-3, 0.0]), tx.init(params), params)[0]  # -lr sign(g)
        Array([-0.1,  0.1, -0. ], dtype=float32)

    References:
      Chen et al., *Symbolic discovery of optimization algorithms*, NeurIPS 2023.
    """
    return chain(
        scale_by_lion(b1, b2, mu_dtype=mu_dtype),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def sign_sgd(learning_rate: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""signSGD: every element moves by the learning rate against its gradient's sign.

    `chain(scale_by_sign(), scale_by_learning_rate(learning_rate))`: `optax.sign_sgd`. A
    row-sparse gradient moves its rows only (the sign of each row's summed gradient). A
    gradient of +-inf is taken as its sign, NaN reaches the params; wrap in
    `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).

    Returns:
      An `ElementWise` chain with no slots.

    Raises:
      ValueError: for a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sign_sgd(0.1)
        >>> tx.update(jnp.array([3.0, -1e-4]), tx.init(jnp.zeros(2)))[0]
        Array([-0.1,  0.1], dtype=float32)

    References:
      Bernstein, Wang, Azizzadenesheli, Anandkumar, *signSGD: compressed optimisation for
      non-convex problems*, ICML 2018.
    """
    return chain(scale_by_sign(), scale_by_learning_rate(learning_rate))


@_factory.api
def signum(
    learning_rate: _protocol.ScalarOrSchedule,
    beta: _protocol.ScalarOrSchedule = 0.9,
    *,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Signum: every element moves by the learning rate against the sign of its gradients' moving average.

    `chain(ema(beta, mu_dtype=mu_dtype), scale_by_sign(), scale_by_learning_rate(learning_rate))`:
    `optax.signum` (`mu_dtype` is its `accumulator_dtype`). The average is not
    bias-corrected (the sign does not need it). A row-sparse gradient is densified (the
    average decays on every row). A gradient of +-inf leaves the average infinite for good:
    the params stay finite but that element moves by the rate in one direction whatever the
    later gradients (NaN reaches the params); wrap in `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      beta: decay of the moving average of the gradients, in [0, 1].
      mu_dtype: dtype of the average (default: each param's dtype).

    Returns:
      An `ElementWise` chain; its slot is `ema`.

    Raises:
      ValueError: for `beta` outside [0, 1] or a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.signum(0.1)
        >>> state = tx.init(jnp.zeros(2))
        >>> u, state = tx.update(jnp.array([3.0, -1.0]), state)
        >>> tx.update(jnp.array([-1.0, -1.0]), state)[0]  # the average of 3, -1 is still positive
        Array([-0.1,  0.1], dtype=float32)

    References:
      Bernstein, Wang, Azizzadenesheli, Anandkumar, *signSGD: compressed optimisation for
      non-convex problems*, ICML 2018 (Algorithm 3, Signum).
    """
    _checks.check_in_range("signum", "beta", beta, 0.0, 1.0)  # `ema` would name it `decay`
    return chain(ema(beta, mu_dtype=mu_dtype), scale_by_sign(), scale_by_learning_rate(learning_rate))


@_factory.api
def rprop(
    learning_rate: _protocol.ScalarOrSchedule,
    eta_minus: _protocol.ScalarOrSchedule = 0.5,
    eta_plus: _protocol.ScalarOrSchedule = 1.2,
    min_step_size: _protocol.ScalarOrSchedule = 1e-6,
    max_step_size: _protocol.ScalarOrSchedule = 50.0,
) -> _protocol.GradientTransformation:
    r"""Rprop (iRprop-): per-element step sizes that grow while the gradient keeps its sign, shrink on a flip.

    `chain(scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size, max_step_size),
    scale_by_learning_rate(1.0))`: `optax.rprop`'s chain and defaults, applying the current
    step's update as the paper and `torch.optim.Rprop` do (optax 0.2.8 applies the previous
    step's, see `scale_by_rprop`). `learning_rate` is the initial step size. Use it with
    full-batch gradients. A row-sparse gradient is densified. A gradient of +-inf is taken
    as its sign, NaN reaches the params; wrap in `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the initial step size of every element, > 0 (a schedule is read once, at count 0).
      eta_minus: the factor on a step after a sign change, in (0, 1).
      eta_plus: the factor on a step while the sign holds, >= 1.
      min_step_size: the smallest step size, >= 0.
      max_step_size: the largest step size, > 0 and >= `min_step_size`.

    Returns:
      An `ElementWise` chain; its slots are `step_sizes` and `prev_updates`.

    Raises:
      ValueError: for a factor or step size outside its range, or `min_step_size > max_step_size`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.rprop(0.1)
        >>> params = jnp.zeros(2)
        >>> tx.update(jnp.array([3.0, -1e-4]), tx.init(params), params)[0]  # -step sign(g)
        Array([-0.1,  0.1], dtype=float32)

    References:
      Riedmiller, Braun, *A direct adaptive method for faster backpropagation learning: the
      RPROP algorithm*, IEEE ICNN 1993; Igel, Hüsken, *Improving the Rprop learning
      algorithm*, NC 2000.
    """
    return chain(
        scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size, max_step_size),
        scale_by_learning_rate(_DESCEND),
    )
