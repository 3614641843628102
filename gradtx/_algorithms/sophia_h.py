"""Sophia-H: a clipped Newton step on Hutchinson's Hessian-diagonal estimates (pytorch-optimizer's)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._algorithms import hutchinson as _hutchinson
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import update_rule
from gradtx.combinators._weight_decay import torch_weight_decay


class ScaleBySophiaHState(NamedTuple):
    """State of `scale_by_sophia_h` (pytorch-optimizer's slot names)."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # the moving average of the gradients (starts at 0)
    hessian_moment: _protocol.Updates  # the moving average of the estimates (starts at 0)
    hessian: _protocol.Updates  # the last Hutchinson estimate of the Hessian's diagonal (starts at 0)


def _sophia_h(g, momentum, hessian_moment, hessian, h):
    """Sophia-H's step for one parameter: the momentum over the floored estimate average, clipped."""
    momentum = _formulas.optax_moment(momentum, g, h.b1)
    averaged = _formulas.optax_moment(hessian_moment, hessian, h.b2)
    hessian_moment = jnp.where(h.refresh, averaged, hessian_moment)
    step = jnp.clip(momentum / jnp.maximum(hessian_moment, h.eps), -h.clip_threshold, h.clip_threshold)
    return step, momentum, hessian_moment, hessian


def _check_direction(fn, b1, b2, eps, clip_threshold, update_period, num_samples, distribution, seed):
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "clip_threshold", clip_threshold)
    _checks.check_int(fn, "update_period", update_period, minimum=1)
    _checks.check_int(fn, "num_samples", num_samples, minimum=1)
    _checks.check_one_of(fn, "hessian_distribution", distribution, _hutchinson.DISTRIBUTIONS)
    _checks.check_int(fn, "seed", seed, minimum=0)


def _sophia_h_rule(fn, b1, b2, eps, clip_threshold, update_period, num_samples, distribution, seed):
    rule = update_rule(
        fn,
        ScaleBySophiaHState,
        _sophia_h,
        hyper={"b1": b1, "b2": b2, "eps": eps, "clip_threshold": clip_threshold},
        slots={"momentum": 0.0, "hessian_moment": 0.0, "hessian": 0.0},
        prepare=lambda h, state, extra_args: _hutchinson.is_refresh(h, update_period),
        real_only=_hutchinson.REAL,
    )
    return _hutchinson.with_hutchinson(
        fn, rule, update_period=update_period, num_samples=num_samples, distribution=distribution, seed=seed
    )


@_registry.transform()
def scale_by_sophia_h(
    b1: _protocol.ScalarOrSchedule = 0.96,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-12,
    clip_threshold: _protocol.ScalarOrSchedule = 1e-2,
    update_period: int = 10,
    num_samples: int = 1,
    *,
    hessian_distribution: str = "gaussian",
    seed: int = 0,
) -> _protocol.GradientTransformation:
    r"""Sophia-H's scaling: the momentum over the floored Hessian-diagonal average, clipped element-wise.

    With :math:`\hat h_t` Hutchinson's estimate of the Hessian's diagonal at the params
    (`hutchinson_diag_hessian`), refreshed every `update_period` steps (the first at step 1):

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad
        h_t = \beta_2 h_{t-1} + (1-\beta_2)\, \hat h_t \text{ on a refresh step, else } h_{t-1}, \\
        u_t = \operatorname{clip}\big(m_t / \max(h_t, \epsilon), \pm\rho\big)

    The numbers of pytorch-optimizer's `SophiaH`: the paper's Algorithm 3 with Gaussian probes, the
    estimate averaged in before the step reads it, no bias correction, and the clip written without the
    paper's :math:`\gamma`: the paper's step :math:`\eta\operatorname{clip}(m / \max(\gamma h, \epsilon), 1)`
    is this one with :math:`\rho = \gamma`, rate :math:`\eta/\gamma` and :math:`\epsilon/\gamma`.
    gradtx's `sophia` keeps optax's numbers (`optax.contrib.sophia`; the squared-gradient estimate of
    its first version, optax issue #968, is gone): random-sign probes, a bias-corrected momentum,
    :math:`\gamma`, and the step reading the average of the *previous* refresh (0 at step 1, so its
    first steps are clipped); use it for optax's numbers, this for pytorch-optimizer's. `update` needs
    the params and the extra argument `obj_fn(params) -> loss` (the probes drawn from the extra argument
    `key`, default `PRNGKey(seed)` folded with the count), or the estimate itself as `hessian` (a tree
    like the params; read on refresh steps only). Follow with the learning rate (`sophia_h`). A row-sparse
    gradient is densified.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the estimates' average (per refresh), in [0, 1).
      eps: the smallest denominator, >= 0.
      clip_threshold: :math:`\rho`, the bound of each element of the step (the reference's `p`), >= 0.
      update_period: refresh the estimate every this many steps, an int >= 1.
      num_samples: the probes averaged per estimate, an int >= 1.
      hessian_distribution: the probes' distribution, `"gaussian"` or `"rademacher"`.
      seed: the seed of the probes' default keys, an int >= 0.

    Returns:
      A `LeafWise` transform with state `ScaleBySophiaHState(count, momentum, hessian_moment, hessian)`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or `clip_threshold`, a period or sample
        count < 1, an unknown distribution; at update time, without params.
      TypeError: for non-int counts; `MissingExtraArgError` without `obj_fn` or `hessian`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_sophia_h(b1=0.0, b2=0.0, clip_threshold=1.0)
        >>> params = jnp.array([1.0, -2.0])
        >>> obj_fn = lambda w: jnp.sum(jnp.array([1.0, 4.0]) * w**2)  # Hessian diag(2, 8)
        >>> tx.update(jnp.array([1.0, -4.0]), tx.init(params), params, hessian=jnp.array([2.0, 8.0]))[0]
        Array([ 0.5, -0.5], dtype=float32)

    References:
      Liu, Li, Hall, Liang, Ma, *Sophia: a scalable stochastic second-order optimizer for language model
      pre-training*, ICLR 2024 (arXiv:2305.14342); pytorch-optimizer's `SophiaH` (the reference of the
      tests).
    """
    fn = "scale_by_sophia_h"
    _check_direction(fn, b1, b2, eps, clip_threshold, update_period, num_samples, hessian_distribution, seed)
    return _sophia_h_rule(
        fn, b1, b2, eps, clip_threshold, update_period, num_samples, hessian_distribution, seed
    )


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.SophiaH",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "fixed_decay": "fixed_decay",
            "p": "clip_threshold",
            "update_period": "update_period",
            "num_samples": "num_samples",
            "hessian_distribution": "hessian_distribution",
            "eps": "eps",
        },
        defaults={"lr": 6e-2, "betas": (0.96, 0.99)},
        fixed={"maximize": False},
    )
)
def sophia_h(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.96,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-12,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    clip_threshold: _protocol.ScalarOrSchedule = 1e-2,
    update_period: int = 10,
    num_samples: int = 1,
    *,
    weight_decouple: bool = True,
    fixed_decay: bool = False,
    hessian_distribution: str = "gaussian",
    seed: int = 0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Sophia-H: a clipped Newton step on Hutchinson's Hessian-diagonal estimates, as pytorch-optimizer's.

    `scale_by_sophia_h` and the learning rate, the weight decay as pytorch-optimizer applies it
    (`torch_weight_decay`: decoupled and scaled by the rate by default; `fixed_decay` drops the rate;
    `weight_decouple=False` adds :math:`\lambda w` to the gradient): the numbers of its `SophiaH`
    (`gradtx.get("SophiaH", lr=..., p=...)` takes its arguments and defaults). Its estimate needs the
    extra argument `obj_fn`: `tx.update(grads, state, params, obj_fn=lambda p: loss(p, batch))`, or the
    estimate as `hessian` (as PyTorch's `step(hessian=...)`, but read on refresh steps only). How it
    differs from gradtx's `sophia` (optax's numbers): see `scale_by_sophia_h`. A row-sparse gradient is
    densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1).
      b2: decay of the estimates' average (per refresh), in [0, 1).
      eps: the smallest denominator, >= 0.
      weight_decay: :math:`\lambda`, >= 0.
      clip_threshold: the bound of each element of the step before the rate (the reference's `p`), >= 0.
      update_period: refresh the estimate every this many steps, an int >= 1.
      num_samples: the probes averaged per estimate, an int >= 1.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      fixed_decay: with `weight_decouple`, decay by :math:`\lambda` instead of :math:`\eta\lambda`.
      hessian_distribution: the probes' distribution, `"gaussian"` or `"rademacher"`.
      seed: the seed of the probes' default keys, an int >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      A `LeafWise` chain; its slots are `momentum`, `hessian_moment` and `hessian`.

    Raises:
      ValueError: as `scale_by_sophia_h`, or for a negative rate or weight decay.
      TypeError: as `scale_by_sophia_h`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sophia_h(0.1)
        >>> params = jnp.array([1.0, -2.0])
        >>> obj_fn = lambda w: jnp.sum(jnp.array([1.0, 4.0]) * w**2)
        >>> tx.update(jnp.array([2.0, -16.0]), tx.init(params), params, obj_fn=obj_fn)[0]  # -lr p sign(g)
        Array([-0.001,  0.001], dtype=float32)

    References:
      Liu, Li, Hall, Liang, Ma, *Sophia: a scalable stochastic second-order optimizer for language model
      pre-training*, ICLR 2024 (arXiv:2305.14342); pytorch-optimizer's `SophiaH` (the reference of the
      tests).
    """
    fn = "sophia_h"
    _check_direction(fn, b1, b2, eps, clip_threshold, update_period, num_samples, hessian_distribution, seed)
    return torch_weight_decay(
        _sophia_h_rule(
            fn, b1, b2, eps, clip_threshold, update_period, num_samples, hessian_distribution, seed
        ),
        learning_rate,
        weight_decay,
        decouple=weight_decouple,
        fixed=fixed_decay,
        mask=mask,
    )


__all__ = ["ScaleBySophiaHState", "scale_by_sophia_h", "sophia_h"]
