"""AdaHessian: Adam with the squared Hutchinson estimate of the Hessian's diagonal in place of the squared
gradient (pytorch-optimizer's `AdaHessian`)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._algorithms import hutchinson as _hutchinson
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import SQUARES, update_rule
from gradtx.combinators._weight_decay import torch_weight_decay


class ScaleByAdaHessianState(NamedTuple):
    """State of `scale_by_adahessian` (pytorch-optimizer's slot names)."""

    count: _protocol.Count  # int32: completed updates
    exp_avg: _protocol.Updates  # the moving average of the gradients (starts at 0)
    exp_hessian_diag_sq: _protocol.Updates  # the moving average of the squared estimates (starts at 0)
    hessian: _protocol.Updates  # the last Hutchinson estimate of the Hessian's diagonal (starts at 0)


def _adahessian(g, exp_avg, exp_hessian_diag_sq, hessian, h):
    """AdaHessian's step for one parameter: Adam's, the estimate squared in place of the gradient."""
    exp_avg = _formulas.optax_moment(exp_avg, g, h.b1)
    averaged = _formulas.optax_moment(exp_hessian_diag_sq, hessian * hessian, h.b2)
    exp_hessian_diag_sq = jnp.where(h.refresh, averaged, exp_hessian_diag_sq)
    denom = (exp_hessian_diag_sq / h.bc2) ** (h.hessian_power / 2) + h.eps
    return exp_avg / h.bc1 / denom, exp_avg, exp_hessian_diag_sq, hessian


def _prepare(h, state, extra_args, *, update_period):
    del state, extra_args
    return {
        "bc1": _formulas.torch_debias(h.b1, h.t),
        "bc2": _formulas.torch_debias(h.b2, h.t),
        **_hutchinson.is_refresh(h, update_period),
    }


def _spatial_average(axes: tuple[int, ...], d: jax.Array) -> jax.Array:
    """The estimate's magnitude averaged over a 4-D leaf's kernel `axes` (AdaHessian's paper)."""
    if jnp.ndim(d) != 4:
        return d
    return jnp.broadcast_to(jnp.mean(jnp.abs(d), axis=axes, keepdims=True), jnp.shape(d))


def _check_direction(fn, b1, b2, eps, hessian_power, update_period, num_samples, distribution, axes, seed):
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_in_range(fn, "hessian_power", hessian_power, 0.0, 1.0, low_open=True)
    _checks.check_int(fn, "update_period", update_period, minimum=1)
    _checks.check_int(fn, "num_samples", num_samples, minimum=1)
    _checks.check_one_of(fn, "hessian_distribution", distribution, _hutchinson.DISTRIBUTIONS)
    _checks.check_int(fn, "seed", seed, minimum=0)
    if axes is not None:
        if not isinstance(axes, tuple) or not all(isinstance(a, int) and -4 <= a < 4 for a in axes):
            raise TypeError(
                f"`{fn}`: `spatial_axes` must be a tuple of axes of a 4-D leaf or None, got {axes!r}."
            )


@_registry.transform()
def scale_by_adahessian(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    hessian_power: _protocol.ScalarOrSchedule = 1.0,
    update_period: int = 1,
    num_samples: int = 1,
    *,
    hessian_distribution: str = "rademacher",
    spatial_axes: tuple[int, ...] | None = None,
    seed: int = 0,
) -> _protocol.GradientTransformation:
    r"""AdaHessian's scaling: the bias-corrected momentum over a power of the Hessian-diagonal RMS.

    With :math:`D_t` Hutchinson's estimate of the Hessian's diagonal at the params
    (`hutchinson_diag_hessian`), refreshed every `update_period` steps (the first at step 1):

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) D_t^2 \text{ on a refresh step, else } v_{t-1}, \\
        u_t = \frac{m_t / (1-\beta_1^t)}{(v_t / (1-\beta_2^t))^{k/2} + \epsilon}

    with :math:`k` the `hessian_power`. The numbers of pytorch-optimizer's `AdaHessian`, which leaves
    out the paper's spatial averaging: gradtx does it when asked (`spatial_axes`: the paper averages
    :math:`|D|` over the kernel axes of each 4-D leaf, `(2, 3)` for PyTorch's OIHW kernels, `(0, 1)` for
    Flax's HWIO). With `update_period` > 1 (the paper's delayed Hessian update), :math:`v` averages the
    refreshes only while its bias correction :math:`1-\beta_2^t` counts every step, as the reference's.
    The bias corrections are taken in double precision, as the reference's (`1 - 0.999` is not
    `1 - float32(0.999)`).
    `update` needs the params and the extra argument `obj_fn(params) -> loss` (the estimate's probes
    drawn from the extra argument `key`, default `PRNGKey(seed)` folded with the count), or the
    estimate itself as `hessian` (a tree like the params; read on refresh steps only). Follow with the
    learning rate (`adahessian`). A row-sparse gradient is densified.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the squared estimates' average, in [0, 1).
      eps: added to the denominator, >= 0.
      hessian_power: :math:`k`, the power of the Hessian-diagonal RMS, in (0, 1].
      update_period: refresh the estimate every this many steps, an int >= 1.
      num_samples: the probes averaged per estimate, an int >= 1.
      hessian_distribution: the probes' distribution, `"rademacher"` or `"gaussian"`.
      spatial_axes: the axes of 4-D leaves to average the estimate's magnitude over; None: none.
      seed: the seed of the probes' default keys, an int >= 0.

    Returns:
      A `LeafWise` transform with state `ScaleByAdaHessianState(count, exp_avg, exp_hessian_diag_sq,
      hessian)`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, `hessian_power` outside (0, 1], a period
        or sample count < 1, an unknown distribution; at update time, without params.
      TypeError: for non-int counts or bad `spatial_axes`; `MissingExtraArgError` without `obj_fn` or
        `hessian`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adahessian()
        >>> params = jnp.array([1.0, -2.0])
        >>> obj_fn = lambda w: jnp.sum(jnp.array([1.0, 4.0]) * w**2)  # Hessian diag(2, 8)
        >>> tx.update(jnp.array([1.0, -2.0]), tx.init(params), params, obj_fn=obj_fn)[0]  # g / |D|
        Array([ 0.5 , -0.25], dtype=float32)

    References:
      Yao, Gholami, Shen, Mustafa, Keutzer, Mahoney, *ADAHESSIAN: an adaptive second order optimizer for
      machine learning*, AAAI 2021 (arXiv:2006.00719); pytorch-optimizer's `AdaHessian` (the reference of
      the tests).
    """
    fn = "scale_by_adahessian"
    _check_direction(fn, b1, b2, eps, hessian_power, update_period, num_samples, hessian_distribution,
                     spatial_axes, seed)  # fmt: skip
    return _adahessian_rule(
        fn, b1, b2, eps, hessian_power, update_period, num_samples, hessian_distribution, spatial_axes, seed
    )


def _adahessian_rule(fn, b1, b2, eps, hessian_power, update_period, num_samples, distribution, axes, seed):
    rule = update_rule(
        fn,
        ScaleByAdaHessianState,
        _adahessian,
        hyper={"b1": b1, "b2": b2, "eps": eps, "hessian_power": hessian_power},
        slots={"exp_avg": 0.0, "exp_hessian_diag_sq": SQUARES, "hessian": 0.0},
        prepare=functools.partial(_prepare, update_period=update_period),
        real_only=_hutchinson.REAL,
    )
    return _hutchinson.with_hutchinson(
        fn,
        rule,
        update_period=update_period,
        num_samples=num_samples,
        distribution=distribution,
        seed=seed,
        transform=None if axes is None else functools.partial(_spatial_average, axes),
    )


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.AdaHessian",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "fixed_decay": "fixed_decay",
            "hessian_power": "hessian_power",
            "update_period": "update_period",
            "num_samples": "num_samples",
            "hessian_distribution": "hessian_distribution",
            "eps": "eps",
        },
        defaults={"lr": 1e-1, "betas": (0.9, 0.999)},
        fixed={"maximize": False},
    )
)
def adahessian(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-16,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    hessian_power: _protocol.ScalarOrSchedule = 1.0,
    update_period: int = 1,
    num_samples: int = 1,
    *,
    weight_decouple: bool = True,
    fixed_decay: bool = False,
    hessian_distribution: str = "rademacher",
    spatial_axes: tuple[int, ...] | None = None,
    seed: int = 0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdaHessian: Adam over the RMS of Hutchinson's Hessian-diagonal estimates, as pytorch-optimizer's.

    `scale_by_adahessian` and the learning rate, the weight decay as pytorch-optimizer applies it
    (`torch_weight_decay`: decoupled and scaled by the rate by default; `fixed_decay` drops the rate;
    `weight_decouple=False` adds :math:`\lambda w` to the gradient): the numbers of its `AdaHessian`
    (`gradtx.get("AdaHessian", lr=..., betas=...)` takes its arguments and defaults). Its estimate needs
    the extra argument `obj_fn`: `tx.update(grads, state, params, obj_fn=lambda p: loss(p, batch))`, or
    the estimate as `hessian` (as PyTorch's `step(hessian=...)`, but read on refresh steps only). Where
    the reference's bias correction and lack of spatial averaging depart from the paper, see
    `scale_by_adahessian`. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1).
      b2: decay of the squared estimates' average, in [0, 1).
      eps: added to the denominator, >= 0.
      weight_decay: :math:`\lambda`, >= 0.
      hessian_power: the power of the Hessian-diagonal RMS, in (0, 1].
      update_period: refresh the estimate every this many steps, an int >= 1.
      num_samples: the probes averaged per estimate, an int >= 1.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      fixed_decay: with `weight_decouple`, decay by :math:`\lambda` instead of :math:`\eta\lambda`.
      hessian_distribution: the probes' distribution, `"rademacher"` or `"gaussian"`.
      spatial_axes: the axes of 4-D leaves to average the estimate's magnitude over; None: none.
      seed: the seed of the probes' default keys, an int >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      A `LeafWise` chain; its slots are `exp_avg`, `exp_hessian_diag_sq` and `hessian`.

    Raises:
      ValueError: as `scale_by_adahessian`, or for a negative rate or weight decay.
      TypeError: as `scale_by_adahessian`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adahessian(0.1)
        >>> params = jnp.array([1.0, -2.0])
        >>> obj_fn = lambda w: jnp.sum(jnp.array([1.0, 4.0]) * w**2)  # Hessian diag(2, 8)
        >>> tx.update(jnp.array([2.0, -16.0]), tx.init(params), params, obj_fn=obj_fn)[0]  # -lr g / |D|
        Array([-0.1,  0.2], dtype=float32)

    References:
      Yao, Gholami, Shen, Mustafa, Keutzer, Mahoney, *ADAHESSIAN: an adaptive second order optimizer for
      machine learning*, AAAI 2021 (arXiv:2006.00719); pytorch-optimizer's `AdaHessian` (the reference of
      the tests).
    """
    fn = "adahessian"
    _check_direction(fn, b1, b2, eps, hessian_power, update_period, num_samples, hessian_distribution,
                     spatial_axes, seed)  # fmt: skip
    return torch_weight_decay(
        _adahessian_rule(
            fn,
            b1,
            b2,
            eps,
            hessian_power,
            update_period,
            num_samples,
            hessian_distribution,
            spatial_axes,
            seed,
        ),
        learning_rate,
        weight_decay,
        decouple=weight_decouple,
        fixed=fixed_decay,
        mask=mask,
    )


__all__ = ["ScaleByAdaHessianState", "adahessian", "scale_by_adahessian"]
