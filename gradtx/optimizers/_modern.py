"""Adaptive element-wise optimizers after TF1, as chains in optax's form: RAdam, AdaBelief, Yogi, Adan and
NAdamW.

Each is the chain of the optax alias of the same name, with its defaults and numbers:
the building block, then (where the optimizer has one) `add_decayed_weights` -- weight
decay multiplied by the learning rate, optax's order -- then the learning rate. They are
`ElementWise` (unless a weight-decay `mask` is given), so they run on packed parameters
as they are. Their epsilon is optax's (outside the root of the bias-corrected second
moment), not TF1's epsilon-hat of `adam` / `nadam`. The sign-based ones (Lion, signSGD,
Signum, Rprop) are in `_modern_sign.py`.
"""

from __future__ import annotations

from typing import Any

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain
from gradtx.transforms import (
    scale_by_adan,
    scale_by_belief,
    scale_by_bias_corrected_adam,
    scale_by_learning_rate,
    scale_by_radam,
    scale_by_yogi,
)


@_factory.api
def radam(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    threshold: _protocol.ScalarOrSchedule = 5.0,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""RAdam: Adam whose adaptive rate is rectified while its variance is large, in place of a warmup.

    `chain(scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.radam`. The
    first steps (until :math:`\rho_t` reaches `threshold`) are momentum steps. A row-sparse
    gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      threshold: the smallest :math:`\rho_t` that takes a rectified step, >= 4.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, `eps_root` or rate, or `threshold` < 4.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.radam(0.1)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr g (momentum)
        [-0.2, 0.05]

    References:
      Liu et al., *On the variance of the adaptive learning rate and beyond*, ICLR 2020.
    """
    return chain(
        scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def adabelief(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    eps_root: _protocol.ScalarOrSchedule = 1e-16,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""AdaBelief: Adam with steps set by how far each gradient is from its momentum's prediction.

    `chain(scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.adabelief`
    (the paper's epsilons are `eps=1e-8`, `eps_root=0`). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` chain; its slots are `m` and `s`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adabelief(0.09)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # -lr sign(g) / 0.9
        [-0.1, 0.1]

    References:
      Zhuang et al., *AdaBelief optimizer: adapting stepsizes by the belief in observed
      gradients*, NeurIPS 2020.
    """
    return chain(
        scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov), scale_by_learning_rate(learning_rate)
    )


@_factory.api
def yogi(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-3,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    initial_accumulator_value: float = 1e-6,
) -> _protocol.GradientTransformation:
    r"""Yogi: Adam whose second moment moves additively, so a burst of large gradients fades slowly.

    `chain(scale_by_yogi(b1, b2, eps, eps_root, initial_accumulator_value),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.yogi`. A
    row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: the second moment's rate, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      initial_accumulator_value: the initial value of both moments, >= 0.

    Returns:
      An `ElementWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, initial value or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.yogi(0.1, eps=0.0, initial_accumulator_value=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # -lr sign(g)
        [-0.1, 0.1]

    References:
      Zaheer, Reddi, Sachan, Kale, Kumar, *Adaptive methods for nonconvex optimization*,
      NeurIPS 2018.
    """
    return chain(
        scale_by_yogi(b1, b2, eps, eps_root, initial_accumulator_value), scale_by_learning_rate(learning_rate)
    )


@_factory.api
def adan(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.98,
    b2: _protocol.ScalarOrSchedule = 0.92,
    b3: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adan: adaptive Nesterov momentum from the gradients and their differences, with weight decay.

    `chain(scale_by_adan(b1, b2, b3, eps, eps_root), add_decayed_weights(weight_decay,
    mask=mask), scale_by_learning_rate(learning_rate))`: the numbers and defaults of
    `optax.adan` (its decay is decoupled and multiplied by the rate, not the paper's
    proximal form). The state is four copies of the params. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the gradients' average, in [0, 1).
      b2: decay of the differences' average, in [0, 1).
      b3: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m`, `v`, `n` and `prev_grad`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adan(0.1, eps_root=0.0, eps=0.0)
        >>> params = jnp.zeros(2)
        >>> u, _ = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)
        >>> [round(float(x), 4) for x in u]  # step 1: -lr sign(g)
        [-0.1, 0.1]

    References:
      Xie, Zhou, Li, Lin, Yan, *Adan: adaptive Nesterov momentum algorithm for faster
      optimizing deep models*, IEEE TPAMI 2024 (arXiv:2208.06677).
    """
    return chain(
        scale_by_adan(b1, b2, b3, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def nadamw(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""NAdamW: Adam with Nesterov's first moment (Dozat's NAdam) and weight decay multiplied by the rate.

    `chain(scale_by_bias_corrected_adam(b1, b2, eps, eps_root, nesterov=True,
    mu_dtype=mu_dtype), add_decayed_weights(weight_decay, mask=mask),
    scale_by_learning_rate(learning_rate))`: the numbers and defaults of `optax.nadamw`
    (`weight_decay=0` gives `optax.nadam`). Not `gradtx.nadam`, which is tf.contrib's Nadam
    (TF1's epsilon-hat Adam with a Nesterov kernel, no decay). A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      weight_decay: added to the step as `weight_decay * params` (then multiplied by the rate), >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype).
      nu_dtype: dtype of the second moment `v` (default: each param's dtype).

    Returns:
      An `ElementWise` chain (`LeafWise` with a `mask`); its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `eps`, `eps_root`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.nadamw(0.1, eps=0.0, weight_decay=0.0)
        >>> params = jnp.zeros(2)
        >>> u = tx.update(jnp.array([2.0, -0.5]), tx.init(params), params)[0]
        >>> [round(float(x), 4) for x in u]  # -lr (b1 / (1 + b1) + 1) sign(g)
        [-0.1474, 0.1474]

    References:
      Dozat, *Incorporating Nesterov momentum into Adam*, ICLR 2016 workshop; Loshchilov,
      Hutter, *Decoupled weight decay regularization*, ICLR 2019.
    """
    return chain(
        scale_by_bias_corrected_adam(
            b1, b2, eps, eps_root, nesterov=True, mu_dtype=mu_dtype, nu_dtype=nu_dtype
        ),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )
