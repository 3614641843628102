"""The other tf.contrib.opt optimizers: MomentumW, LARS, RegAdagrad, AddSign, PowerSign, GGT, Shampoo.

The Adam variants are in `_contrib_adam.py`."""

from __future__ import annotations

import math
from typing import Any, Sequence

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import chain, decoupled_weight_decay
from gradtx.optimizers._tf_train import adagrad
from gradtx.transforms import (
    scale_by_addsign,
    scale_by_ggt,
    scale_by_lars,
    scale_by_learning_rate,
    scale_by_powersign,
    scale_by_shampoo,
    trace,
)


@_factory.api
def momentumw(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule,
    weight_decay: _protocol.ScalarOrSchedule,
    *,
    nesterov: bool = False,
    mask: Any = None,
    scale_decay_by_learning_rate: bool = False,
) -> _protocol.GradientTransformation:
    r"""MomentumW: `tf.contrib.opt.MomentumWOptimizer`: `var -= weight_decay * var`, then TF's momentum step.

    The decay is not multiplied by the learning rate (`scale_decay_by_learning_rate=True`
    for that convention); `mask` plays `decay_var_list`; a row-sparse gradient decays and
    moves its rows only. This is `decoupled_weight_decay(momentum(...), weight_decay, mask=mask)`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      momentum: the momentum, in [0, 1].
      weight_decay: the decay factor, >= 0.
      nesterov: use the Nesterov form (TF's `use_nesterov`).
      mask: which params decay (tree of bools, function or key-path patterns); all if None.
      scale_decay_by_learning_rate: multiply the decay by the learning rate.

    Returns:
      A `GradientTransformation`; the momentum slot is in `state.inner_state`.

    Raises:
      ValueError: for a bad rate, momentum or weight decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.momentumw(0.1, 0.9, 0.5)
        >>> params = jnp.array([2.0])
        >>> tx.update(jnp.array([1.0]), tx.init(params), params)[0]
        Array([-1.1], dtype=float32)
    """
    _checks.check_bool("momentumw", "scale_decay_by_learning_rate", scale_decay_by_learning_rate)
    momentum_chain = chain(trace(momentum, nesterov=nesterov), scale_by_learning_rate(learning_rate))
    return decoupled_weight_decay(
        momentum_chain,
        weight_decay,
        mask=mask,
        learning_rate=learning_rate if scale_decay_by_learning_rate else None,
    )


@_factory.api
def lars(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule = 0.9,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    eeta: _protocol.ScalarOrSchedule = 0.001,
    eps: _protocol.ScalarOrSchedule = 0.0,
    *,
    skip: Sequence[str] = (),
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    r"""LARS: contrib's `LARSOptimizer` (its trust ratio), not `optax.lars`: that is `optax_compat.lars`.

    This is `chain(scale_by_lars(momentum, weight_decay, eeta, eps, skip=skip, nesterov=nesterov),
    scale_by_learning_rate(learning_rate))`; see `scale_by_lars` for the trust ratio. Row-sparse
    gradients take plain momentum with the unscaled rate on their rows.

    Args:
      learning_rate: the base learning rate (number, scalar array or schedule).
      momentum: the momentum, >= 0.
      weight_decay: the weight decay inside the trust ratio, >= 0.
      eeta: the LARS coefficient.
      eps: added to the trust ratio's denominator, >= 0.
      skip: key-path substrings of variables without LARS scaling (TF's `skip_list`).
      nesterov: use the Nesterov form (TF's `use_nesterov`).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "momentum")`.

    Raises:
      ValueError: as contrib: a negative momentum or weight decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lars(1.0, momentum=0.0, weight_decay=0.0, eeta=1.0)
        >>> params = {"w": jnp.array([3.0, 4.0])}
        >>> u, _ = tx.update({"w": jnp.array([0.0, 10.0])}, tx.init(params), params)
        >>> gradtx.apply_updates(params, u)["w"]  # trust ratio |w| / |g| = 0.5
        Array([ 3., -1.], dtype=float32)
    """
    return chain(
        scale_by_lars(momentum, weight_decay, eeta, eps, skip=skip, nesterov=nesterov),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
def reg_adagrad(
    learning_rate: _protocol.ScalarOrSchedule, initial_accumulator_value: float = 0.1
) -> _protocol.GradientTransformation:
    r"""RegAdagrad: `tf.contrib.opt.RegAdagradOptimizer`: Adagrad whose slots can be left alone for a step.

    A step called as `update(..., update_slots=False)` applies Adagrad's rate without
    adding the gradient to the accumulator (TF's `with opt.avoid_updating_slots():`), e.g.
    for a regularization gradient. Otherwise it is `adagrad`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      initial_accumulator_value: start of the accumulator; must be > 0.

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "accumulator")`.

    Raises:
      ValueError: if `initial_accumulator_value` is not positive or the rate is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.reg_adagrad(1.0, initial_accumulator_value=4.0)
        >>> u, state = tx.update(jnp.ones(1), tx.init(jnp.zeros(1)), update_slots=False)
        >>> u, gradtx.get_slot(state, "accumulator")
        (Array([-0.5], dtype=float32), Array([4.], dtype=float32))
    """
    return adagrad(learning_rate, initial_accumulator_value)


@_factory.api
def addsign(
    learning_rate: _protocol.ScalarOrSchedule = 0.1,
    alpha: _protocol.ScalarOrSchedule = 1.0,
    beta: _protocol.ScalarOrSchedule = 0.9,
    sign_decay: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""AddSign: `tf.contrib.opt.AddSignOptimizer` (`ApplyAddSign`), TF's defaults.

    `m = beta * m + (1 - beta) * g`, then `var -= lr * (alpha + d * sign(g) * sign(m)) * g`
    with the new `m` and `d` the sign decay (1 when None; TF's `sign_decay_fn`, e.g.
    `gradtx.schedules.linear_sign_decay(decay_steps)`, which sees `count = t-1`, TF's
    `global_step`). This is
    `chain(scale_by_addsign(alpha, beta, sign_decay), scale_by_learning_rate(learning_rate))`.
    Row-sparse gradients follow contrib: `m` decays on every row (O(table)), the variable
    moves on the touched rows only.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      alpha: the constant part of the multiplier, finite.
      beta: the decay of the moving average `m`, in [0, 1].
      sign_decay: None (1.0), a number, or a schedule `count -> value` (TF's `sign_decay_fn`).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "m")`.

    Raises:
      ValueError: for `beta` outside [0, 1], a non-finite `alpha` or `sign_decay`, a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.addsign(learning_rate=0.1)
        >>> [round(float(u), 6) for u in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.4, 0.1]
    """
    return chain(scale_by_addsign(alpha, beta, sign_decay), scale_by_learning_rate(learning_rate))


@_factory.api
def powersign(
    learning_rate: _protocol.ScalarOrSchedule = 0.1,
    base: _protocol.ScalarOrSchedule = math.e,
    beta: _protocol.ScalarOrSchedule = 0.9,
    sign_decay: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""PowerSign: `tf.contrib.opt.PowerSignOptimizer` (`ApplyPowerSign`), TF's defaults.

    `m = beta * m + (1 - beta) * g`, then
    `var -= lr * exp(log(base) * d * sign(g) * sign(m)) * g` with the new `m` and `d` the
    sign decay (1 when None; TF's `sign_decay_fn`, e.g.
    `gradtx.schedules.cosine_sign_decay(decay_steps)`, which sees `count = t-1`). This is
    `chain(scale_by_powersign(base, beta, sign_decay), scale_by_learning_rate(learning_rate))`.
    Row-sparse gradients follow contrib: `m` decays on every row (O(table)), the variable
    moves on the touched rows only, with contrib's `pow(e, .)` in place of `exp`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      base: the base, > 0 (`log(base)` is taken in double precision, as contrib does).
      beta: the decay of the moving average `m`, in [0, 1].
      sign_decay: None (1.0), a number, or a schedule `count -> value` (TF's `sign_decay_fn`).

    Returns:
      A `GradientTransformation`; its slot is `gradtx.get_slot(state, "m")`.

    Raises:
      ValueError: for a `base` not positive and finite, `beta` outside [0, 1], a non-finite
        `sign_decay`, a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.powersign(learning_rate=0.1)
        >>> [round(float(u), 5) for u in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.54366, 0.13591]
    """
    return chain(scale_by_powersign(base, beta, sign_decay), scale_by_learning_rate(learning_rate))


@_factory.api
def ggt(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    window: int = 10,
    eps: _protocol.ScalarOrSchedule = 1e-4,
    svd_eps: _protocol.ScalarOrSchedule = 1e-6,
    sigma_eps: _protocol.ScalarOrSchedule = 1e-2,
) -> _protocol.GradientTransformation:
    r"""GGT: `tf.contrib.opt.GGTOptimizer`, full-matrix AdaGrad over a window of first moments.

    `var -= lr * u`, where `u` preconditions the first moment of all the elements of all
    leaves together with the last `window` first moments (only a `window x window`
    matrix is decomposed). This is
    `chain(scale_by_ggt(b1, window, eps, svd_eps, sigma_eps), scale_by_learning_rate(learning_rate))`;
    see `scale_by_ggt` for the math. Row-sparse gradients are densified (TF raises for them).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1) (TF's `beta1`).
      window: the number of first moments kept, an int >= 1.
      eps: the tail term is used when the smallest root singular value exceeds `eps`; >= 0.
      svd_eps: added to the diagonal of the Gram matrix before the SVD; >= 0.
      sigma_eps: added to the root singular values before the cube; >= 0.

    Returns:
      An `ElementWise` transform; the state is `state[0].moment1` and `state[0].grad_buffer`
      (TF's non-slot variables, kept leaf by leaf).

    Raises:
      TypeError: for a non-integer `window` or a non-numeric hyperparameter.
      ValueError: for `b1` outside [0, 1), `window` < 1, or a negative epsilon or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.ggt(learning_rate=0.1, window=3)
        >>> params = {"w": jnp.zeros(2), "b": jnp.zeros(())}
        >>> u, state = tx.update({"w": jnp.array([1.0, 1.0]), "b": jnp.array(1.0)}, tx.init(params))
        >>> state[0].grad_buffer["w"].shape  # [window, *shape]
        (3, 2)
        >>> [round(float(x), 3) for x in u["w"]]
        [-0.049, -0.049]
    """
    return chain(scale_by_ggt(b1, window, eps, svd_eps, sigma_eps), scale_by_learning_rate(learning_rate))


@_factory.api
def shampoo(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    *,
    max_matrix_size: int = 768,
    gbar_decay: _protocol.ScalarOrSchedule = 0.0,
    gbar_weight: _protocol.ScalarOrSchedule = 1.0,
    mat_gbar_decay: _protocol.ScalarOrSchedule = 1.0,
    mat_gbar_weight: _protocol.ScalarOrSchedule = 1.0,
    svd_interval: int = 1,
    precond_update_interval: int = 1,
    eps: _protocol.ScalarOrSchedule = 0.1,
    alpha: _protocol.ScalarOrSchedule = 0.5,
    use_iterative_root: bool = False,
) -> _protocol.GradientTransformation:
    r"""Shampoo: `tf.contrib.opt.ShampooOptimizer`, one matrix preconditioner per tensor dimension.

    `var -= lr * gbar x_0 H_0 ... x_{r-1} H_{r-1}` with `H_i = (G_i + eps I)^(-alpha/r)` and
    `G_i` the accumulated outer products of the gradient unfolded along dimension i
    (diagonal for dimensions above `max_matrix_size`). This is
    `chain(scale_by_shampoo(...), scale_by_learning_rate(learning_rate))`; see
    `scale_by_shampoo` for the math, the intervals and the gbar rules. Schedules see
    `count = t - 1` (contrib's lambdas get `t`). Row-sparse gradients are densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      max_matrix_size: dimensions up to this size get a full matrix; larger ones a diagonal.
      gbar_decay: decay of the averaged gradient, in [0, 1].
      gbar_weight: weight of the new gradient in the average, >= 0.
      mat_gbar_decay: decay of the statistics, in [0, 1].
      mat_gbar_weight: weight of the new outer products in the statistics, >= 0.
      svd_interval: recompute the roots every this many steps (int >= 1).
      precond_update_interval: update the matrix statistics every this many steps (int >= 1).
      eps: added to the statistics (times I) and floor of the singular values, >= 0 (TF's
        `epsilon`, whose default 0.1 this is; a rank-deficient statistic amplifies float32
        rounding by about :math:`\sqrt{|G| / \epsilon}`, so smaller values are less steady).
      alpha: total power of the preconditioners, >= 0.
      use_iterative_root: use the Schur-Newton iteration instead of the SVD (rank / alpha
        must then be an integer).

    Returns:
      A `GradientTransformation`; the slots are `state[0].gbar`, `state[0].mat_gbar` (TF's
      `Gbar_<i>`) and `state[0].mat_h` (TF's `H_<i>`); leaf-wise (a per-tensor rule).

    Raises:
      TypeError: for a non-integer size or interval, or a schedule `alpha` with the iterative root.
      ValueError: for a decay outside [0, 1], a negative weight, `eps`, `alpha` or rate, or
        an interval < 1.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.shampoo(learning_rate=0.1, eps=0.0)
        >>> g = jnp.array([[3.0, 0.0], [0.0, 4.0]])
        >>> u, state = tx.update(g, tx.init(g))
        >>> bool(jnp.allclose(u, -0.1 * jnp.eye(2)))  # -lr * G_0^(-1/4) g G_1^(-1/4), G_0 = G_1 = g g^T
        True
    """
    return chain(
        scale_by_shampoo(
            max_matrix_size=max_matrix_size,
            gbar_decay=gbar_decay,
            gbar_weight=gbar_weight,
            mat_gbar_decay=mat_gbar_decay,
            mat_gbar_weight=mat_gbar_weight,
            svd_interval=svd_interval,
            precond_update_interval=precond_update_interval,
            eps=eps,
            alpha=alpha,
            use_iterative_root=use_iterative_root,
        ),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["addsign", "ggt", "lars", "momentumw", "powersign", "reg_adagrad", "shampoo"]
