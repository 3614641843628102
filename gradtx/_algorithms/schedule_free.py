"""Schedule-free learning: `scale_by_schedule_free`, `schedule_free`, its SGD, evaluation params.

Its AdamW is in `schedule_free_adamw.py`, its RAdam in `schedule_free_radam.py`.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByScheduleFreeState(NamedTuple):
    """State of `scale_by_schedule_free`."""

    count: _protocol.Count  # int32: completed updates
    z: _protocol.Updates  # the base sequence z_t (starts at the initial params)
    b1: jax.Array  # the interpolation of the last step: y = (1 - b1) z + b1 x
    weight_sum: jax.Array  # the sum of the averaging weights so far
    max_lr: jax.Array  # the largest learning rate so far


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _schedule_free_scalars(h, state, extra, *, warmup_steps):
    """The step's rate (after warmup), averaging weight `c` and interpolations, once per step.

    The rate, `max_lr`, `weight_sum` and `c` are in the state's dtype. A `b1` given as a number
    stays a number (`1 - b1` in double, as optax computes it) and is also the previous step's;
    otherwise `prev_b1`, the `b1` that made the params `y_t` (a schedule or an injected value
    changes it), is read from the state.
    """
    del extra
    dt = state.max_lr.dtype
    lr = jnp.asarray(h.learning_rate, dt)
    if warmup_steps:
        lr = lr * jnp.minimum(1.0, h.t.astype(dt) / warmup_steps)  # step t gets t / warmup_steps
    return averaging_scalars(h, state, lr)


def averaging_scalars(h: Any, state: Any, lr: Any, t_power: Any = None) -> dict[str, Any]:
    r"""The scalars of `_schedule_free_leaf` from the step's rate `lr`: the running maximum rate, the
    average's weight :math:`(t^r)\, \gamma_{\max}^p` (`t_power` is :math:`r`), its share `c` of the
    weights' sum, and `b1` with the previous step's."""
    dt = state.max_lr.dtype
    max_lr = jnp.maximum(state.max_lr, lr)
    weight = max_lr ** jnp.asarray(h.weight_lr_power, dt)
    if t_power is not None:
        weight = h.t.astype(dt) ** jnp.asarray(t_power, dt) * weight
    weight_sum = state.weight_sum + weight
    c = jnp.where(weight_sum > 0, weight / jnp.where(weight_sum > 0, weight_sum, 1), 0)
    b1 = h.b1 if _is_number(h.b1) else jnp.asarray(h.b1, dt)
    prev_b1 = b1 if _is_number(b1) else state.b1
    return {
        "lr": lr,
        "max_lr": max_lr,
        "weight_sum": weight_sum,
        "c": c,
        "b1": b1,
        "one_minus_b1": 1 - b1,
        "prev_b1": prev_b1,
        "prev_one_minus_b1": 1 - prev_b1,
    }


def _schedule_free_leaf(d, z, y, h, *, steps_given):
    """`(y_{t+1} - y_t, z_{t+1})`: step z, recover x_t from y_t and z_t, average, interpolate."""
    new_z = ((z + d) if steps_given else (z - h.lr * d)).astype(z.dtype)
    x = (y - h.prev_one_minus_b1 * z) / h.prev_b1
    x = (1 - h.c) * x + h.c * new_z
    return h.b1 * x + h.one_minus_b1 * new_z - y, new_z


@_registry.transform()
def scale_by_schedule_free(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    weight_lr_power: _protocol.ScalarOrSchedule = 2.0,
    *,
    warmup_steps: int | None = 0,
    steps_given: bool = False,
    state_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Take a descent direction, step the sequence `z` with it, and return the step of the params `y`.

    With :math:`d_t` the incoming direction (the gradient at :math:`y_t`, or a base
    optimizer's normalised one) and :math:`\gamma_t` the learning rate after a linear
    warmup, :math:`\gamma_t = \eta_t \min(1, t / T_w)`:

    .. math::
        z_{t+1} = z_t - \gamma_t d_t, \qquad
        c_{t+1} = \frac{\gamma_{\max,t}^{p}}{\sum_{i \le t} \gamma_{\max,i}^{p}}, \qquad
        x_{t+1} = (1 - c_{t+1})\, x_t + c_{t+1} z_{t+1}, \\
        y_{t+1} = (1 - \beta_1)\, z_{t+1} + \beta_1 x_{t+1}, \qquad u_t = y_{t+1} - y_t

    where :math:`\gamma_{\max,t}` is the largest rate so far and :math:`p` is
    `weight_lr_power`. The params are :math:`y`; evaluate (and save for inference)
    :math:`x = (y - (1-\beta_1) z) / \beta_1`, given by `schedule_free_eval_params`. Only
    :math:`z` is stored. It is the learning-rate step too: it multiplies by the rate itself
    (so the warmup and the averaging weights see the same :math:`\gamma_t`), and nothing
    after it in a chain should. A row-sparse direction is densified first (every row of
    `x` and `y` moves).

    These are the numbers of `optax.contrib.schedule_free` with a constant rate. A schedule
    here is called with `count` (t - 1), as everywhere in gradtx; optax calls the averaging
    weight's schedule with t and its base optimizer's with t - 1, so with a warmup its
    first base step is zero. The warmup here is the paper's: step t gets :math:`t / T_w`.

    With `steps_given`, the incoming updates are already the steps of :math:`z` (a base
    optimizer's, rate and sign included: :math:`z_{t+1} = z_t + u_t`), and the rate only
    weighs the average: `gradtx.schedule_free` wraps a base optimizer this way, as
    `optax.contrib.schedule_free` does.

    Args:
      learning_rate: :math:`\eta_t`, >= 0 (number, scalar array or schedule; no decay needed).
      b1: :math:`\beta_1`, the interpolation between `z` and `x`, in (0, 1].
      weight_lr_power: :math:`p`, the power of the rate in the averaging weights, >= 0.
      warmup_steps: :math:`T_w`, the length of the linear warmup (an int >= 0; 0 or None: none).
      steps_given: the updates are the steps of :math:`z` (rate and sign included), not a direction.
      state_dtype: the dtype of :math:`z` (None: each parameter's).

    Returns:
      An `ElementWise` transform with state `ScaleByScheduleFreeState(count, z, b1, weight_sum, max_lr)`.

    Raises:
      ValueError: for a negative or non-finite rate or power, `b1` outside (0, 1], or a
        negative `warmup_steps`; at update time, if `params` is missing.
      TypeError: for a non-int `warmup_steps`, a non-bool `steps_given` or a non-float `state_dtype`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_schedule_free(learning_rate=1.0, b1=0.5)
        >>> params = jnp.array([1.0])
        >>> u, state = tx.update(jnp.array([1.0]), tx.init(params), params)
        >>> state.z, u  # z = 1 - 1; x = z (c = 1); y = 0.5 z + 0.5 x
        (Array([0.], dtype=float32), Array([-1.], dtype=float32))
        >>> gradtx.schedule_free_eval_params(state, params + u)
        Array([0.], dtype=float32)

    References:
      Defazio, Yang, Mehta, Mishchenko, Khaled, Cutkosky, *The road less scheduled*,
      NeurIPS 2024 (arXiv:2405.15682), Algorithm 1 and section 4 (warmup, weighting).
    """
    fn = "scale_by_schedule_free"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_finite(fn, "b1", b1)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, low_open=True)
    _checks.check_finite(fn, "weight_lr_power", weight_lr_power)
    _checks.check_nonnegative(fn, "weight_lr_power", weight_lr_power)
    warmup_steps = 0 if warmup_steps is None else warmup_steps
    _checks.check_int(fn, "warmup_steps", warmup_steps, minimum=0)
    _checks.check_bool(fn, "steps_given", steps_given)
    _checks.check_float_dtype(fn, "state_dtype", state_dtype)

    def z_init(p):  # z_1 = the initial params (its own buffer, for donation)
        return jnp.copy(p) if state_dtype is None else jnp.asarray(p, state_dtype)

    return update_rule(
        fn,
        ScaleByScheduleFreeState,
        functools.partial(_schedule_free_leaf, steps_given=steps_given),
        hyper={"learning_rate": learning_rate, "b1": b1, "weight_lr_power": weight_lr_power},
        slots={"z": z_init},
        scalars={"b1": lambda h: h.b1, "weight_sum": lambda h: 0.0, "max_lr": lambda h: 0.0},
        prepare=functools.partial(_schedule_free_scalars, warmup_steps=warmup_steps),
        reads_params=True,
    )


def _find_state(state: Any) -> ScaleByScheduleFreeState | None:
    """The first `ScaleByScheduleFreeState` in a (nested) optimizer state."""
    if isinstance(state, ScaleByScheduleFreeState):
        return state
    if isinstance(state, dict):
        state = list(state.values())
    if isinstance(state, (tuple, list)):
        for s in state:
            found = _find_state(s)
            if found is not None:
                return found
    return None


def schedule_free_eval_params(state: Any, params: Any) -> Any:
    r"""The parameters to evaluate a schedule-free model at: :math:`x = (y - (1-\beta_1) z) / \beta_1`.

    Training moves the params :math:`y`; the average :math:`x` is what to measure the
    validation loss at and to save for inference (`optax.contrib.schedule_free_eval_params`).

    Args:
      state: the state of `schedule_free_adamw`, `schedule_free_sgd` or any chain or
        wrapper holding a `scale_by_schedule_free` state.
      params: the current params :math:`y` (a plain or packed tree).

    Returns:
      :math:`x`, with the structure and dtypes of `params`.

    Raises:
      ValueError: if `state` holds no `scale_by_schedule_free` state.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.schedule_free_sgd(learning_rate=0.5)
        >>> params = {"w": jnp.array([1.0, -1.0])}
        >>> state = tx.init(params)
        >>> for _ in range(3):
        ...     u, state = tx.update(params, state, params)  # the gradient of |w|^2 / 2
        ...     params = gradtx.apply_updates(params, u)
        >>> x = gradtx.schedule_free_eval_params(state, params)
        >>> [round(float(v["w"][0]), 4) for v in (gradtx.get_slot(state, "z"), params, x)]  # z, y, x
        [0.0688, 0.2525, 0.2729]
    """
    found = _find_state(state)
    if found is None:
        raise ValueError(
            "`schedule_free_eval_params`: `state` holds no schedule-free state; pass the state of "
            "`schedule_free_adamw`, `schedule_free_sgd` or a chain with `scale_by_schedule_free`."
        )

    def leaf(y, z):
        if y is None:
            return None
        b1 = _hyper.like(found.b1, y)  # in the params' dtype: a bf16 `z` (`state_dtype`) keeps its own
        return ((y - _hyper.like(1 - found.b1, y) * z) / b1).astype(y.dtype)

    return _walk.map_leaves(leaf, params, found.z)


@_registry.optimizer("SGDScheduleFree")
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


@_registry.wrapper()
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


__all__ = [
    "ScaleByScheduleFreeState",
    "scale_by_schedule_free",
    "schedule_free",
    "schedule_free_eval_params",
    "schedule_free_sgd",
]
