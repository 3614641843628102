"""Schedule-free AdamW and SGD (Defazio et al. 2024), and any optimizer made schedule-free (`schedule_free`),
as chains; evaluate with `schedule_free_eval_params`."""

from __future__ import annotations

from typing import Any

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain
from gradtx.transforms import scale_by_bias_corrected_rms, scale_by_schedule_free


@_factory.api
def schedule_free_adamw(
    learning_rate: _protocol.ScalarOrSchedule = 0.0025,
    warmup_steps: int | None = 0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    weight_lr_power: _protocol.ScalarOrSchedule = 2.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Schedule-free AdamW: Adam's normalisation without momentum, the momentum replaced by averaging.

    `chain(scale_by_bias_corrected_rms(b2, eps), add_decayed_weights(weight_decay, mask=mask),
    scale_by_schedule_free(learning_rate, b1, weight_lr_power, warmup_steps=warmup_steps))`:
    the gradient (taken at the params :math:`y`) is divided by the root of its
    bias-corrected second moment, the decay is added at :math:`y`, and the result steps the
    sequence :math:`z`; see `scale_by_schedule_free`. No decaying schedule is needed: keep
    the rate constant after the warmup. Evaluate and save
    `gradtx.schedule_free_eval_params(state, params)`, not the params. With a constant rate
    these are the numbers of `optax.contrib.schedule_free_adamw`. A row-sparse gradient is
    densified.

    Args:
      learning_rate: the peak rate, >= 0 (number, scalar array or schedule).
      warmup_steps: the length of the linear warmup (an int >= 0; 0 or None: none).
      b1: the interpolation between `z` and its average `x`, in (0, 1].
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      weight_decay: added to the direction as `weight_decay * params` (then multiplied by the rate), >= 0.
      weight_lr_power: the power of the rate in the averaging weights, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (a `LeafWise` one with a `mask`); its slots are `v` and `z`.

    Raises:
      ValueError: for a bad rate, `b1`, `b2`, `eps`, weight decay, power or warmup.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.schedule_free_adamw(0.1, warmup_steps=10)
        >>> params = {"w": jnp.array([1.0, -1.0])}
        >>> state = tx.init(params)
        >>> for _ in range(20):
        ...     u, state = tx.update(params, state, params)  # the gradient of |w|^2 / 2
        ...     params = gradtx.apply_updates(params, u)
        >>> x = gradtx.schedule_free_eval_params(state, params)
        >>> bool(jnp.all(jnp.abs(x["w"]) < 1.0))
        True

    References:
      Defazio, Yang, Mehta, Mishchenko, Khaled, Cutkosky, *The road less scheduled*,
      NeurIPS 2024 (arXiv:2405.15682), Algorithm 1 (AdamW).
    """
    _checks.check_in_range("schedule_free_adamw", "b2", b2, 0.0, 1.0, high_open=True)  # `decay` below
    return chain(
        scale_by_bias_corrected_rms(b2, eps),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_schedule_free(learning_rate, b1, weight_lr_power, warmup_steps=warmup_steps),
    )


@_factory.api
def schedule_free_sgd(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    warmup_steps: int | None = 0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    weight_decay: _protocol.ScalarOrSchedule | None = None,
    weight_lr_power: _protocol.ScalarOrSchedule = 2.0,
) -> _protocol.GradientTransformation:
    r"""Schedule-free SGD: gradient steps on `z`, the params interpolating between `z` and its average.

    `scale_by_schedule_free(learning_rate, b1, weight_lr_power, warmup_steps=warmup_steps)`,
    after `add_decayed_weights(weight_decay)` when a decay is given: see
    `scale_by_schedule_free` for the :math:`y`, :math:`z`, :math:`x` sequences. Evaluate and
    save `gradtx.schedule_free_eval_params(state, params)`. With a constant rate these are
    the numbers of `optax.contrib.schedule_free_sgd`. A row-sparse gradient gets the decay on
    its touched rows only (`add_decayed_weights`'s rule, once per row) and is then densified:
    every row of `x` and `y` moves.

    Args:
      learning_rate: the peak rate, >= 0 (number, scalar array or schedule).
      warmup_steps: the length of the linear warmup (an int >= 0; 0 or None: none).
      b1: the interpolation between `z` and its average `x`, in (0, 1].
      weight_decay: added to the gradient as `weight_decay * params`, >= 0, or None for none.
      weight_lr_power: the power of the rate in the averaging weights, >= 0.

    Returns:
      An `ElementWise` chain; its slot is `z`.

    Raises:
      ValueError: for a bad rate, `b1`, weight decay, power or warmup.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.schedule_free_sgd(0.5, b1=0.5)
        >>> params = jnp.array([2.0])
        >>> u, state = tx.update(params, tx.init(params), params)  # z = 2 - 0.5 * 2; x = z
        >>> u, gradtx.schedule_free_eval_params(state, params + u)
        (Array([-1.], dtype=float32), Array([1.], dtype=float32))

    References:
      Defazio, Yang, Mehta, Mishchenko, Khaled, Cutkosky, *The road less scheduled*,
      NeurIPS 2024 (arXiv:2405.15682), Algorithm 1 (SGD).
    """
    step = scale_by_schedule_free(learning_rate, b1, weight_lr_power, warmup_steps=warmup_steps)
    if weight_decay is None:
        return chain(step)
    return chain(add_decayed_weights(weight_decay), step)


@_factory.api
def schedule_free(
    tx: Any,
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    weight_lr_power: _protocol.ScalarOrSchedule = 2.0,
    *,
    state_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Make any optimizer schedule-free: its steps move the sequence `z`, the params interpolate `z` and its
    average.

    `chain(tx, scale_by_schedule_free(learning_rate, b1, weight_lr_power, steps_given=True,
    state_dtype=state_dtype))`: the base optimizer `tx`'s updates (rate and sign
    included) step :math:`z`; `learning_rate` only weighs the average
    (:math:`c_{t+1} \propto \gamma_{\max,t}^{p}`, see `scale_by_schedule_free`). Switch the
    base optimizer's momentum off (`b1=0` for Adam): the interpolation replaces it. Evaluate
    and save `schedule_free_eval_params(state, params)`. These are the numbers of
    `optax.contrib.schedule_free` with a constant rate (optax calls a rate schedule with t here,
    gradtx with t - 1, as everywhere).

    Args:
      tx: the base optimizer, whose updates step :math:`z` (optax's `base_optimizer`).
      learning_rate: the rate that weighs the average, >= 0 (number, scalar array or schedule).
      b1: the interpolation between `z` and its average `x`, in (0, 1].
      weight_lr_power: the power of the rate in the averaging weights, >= 0.
      state_dtype: the dtype of `z` (None: each parameter's).

    Returns:
      A chain with state `(base state, ScaleByScheduleFreeState(count, z, b1, weight_sum, max_lr))`.

    Raises:
      TypeError: for a non-transform `tx` or a non-float `state_dtype`.
      ValueError: for a bad rate, `b1` or power.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.schedule_free(gradtx.gradient_descent(0.5), learning_rate=0.5, b1=0.5)
        >>> params = jnp.array([2.0])
        >>> u, state = tx.update(params, tx.init(params), params)  # z = 2 - 0.5 * 2; x = z
        >>> u, gradtx.schedule_free_eval_params(state, params + u)
        (Array([-1.], dtype=float32), Array([1.], dtype=float32))

    References:
      Defazio, Yang, Mehta, Mishchenko, Khaled, Cutkosky, *The road less scheduled*,
      NeurIPS 2024 (arXiv:2405.15682).
    """
    _checks.check_transform("schedule_free", "tx", tx)
    return chain(
        tx,
        scale_by_schedule_free(learning_rate, b1, weight_lr_power, steps_given=True, state_dtype=state_dtype),
    )
