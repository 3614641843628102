"""Schedule-free learning: `scale_by_schedule_free` (the y / z / x sequences) and `schedule_free_eval_params`.

The base optimizer's steps move a sequence `z`; the evaluation point `x` is a running
average of the `z`s, and the parameters the gradients are taken at (the params the user
holds, `y`) interpolate between the two. Only `z` is stored: `x` follows from `y` and `z`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, _vma, sparse


class ScaleByScheduleFreeState(NamedTuple):
    """State of `scale_by_schedule_free`."""

    count: _protocol.Count  # int32: completed updates
    z: _protocol.Updates  # the base sequence z_t (starts at the initial params)
    b1: jax.Array  # the interpolation of the last step: y = (1 - b1) z + b1 x
    weight_sum: jax.Array  # the sum of the averaging weights so far
    max_lr: jax.Array  # the largest learning rate so far


def _warmed_up(learning_rate: Any, count: jax.Array, warmup_steps: int, dtype: Any) -> jax.Array:
    """The rate of step `count + 1`: `learning_rate(count) * min(1, (count + 1) / warmup_steps)`."""
    lr = jnp.asarray(_tree.resolve(learning_rate, count), dtype)
    if not warmup_steps:
        return lr
    return lr * jnp.minimum(1.0, (count + 1).astype(dtype) / warmup_steps)


@_base.api
def scale_by_schedule_free(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    weight_lr_power: _protocol.ScalarOrSchedule = 2.0,
    *,
    warmup_steps: int | None = 0,
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

    Args:
      learning_rate: :math:`\eta_t`, >= 0 (number, scalar array or schedule; no decay needed).
      b1: :math:`\beta_1`, the interpolation between `z` and `x`, in (0, 1].
      weight_lr_power: :math:`p`, the power of the rate in the averaging weights, >= 0.
      warmup_steps: :math:`T_w`, the length of the linear warmup (an int >= 0; 0 or None: none).

    Returns:
      An `ElementWise` transform with state `ScaleByScheduleFreeState(count, z, b1, weight_sum, max_lr)`.

    Raises:
      ValueError: for a negative or non-finite rate or power, `b1` outside (0, 1], or a
        negative `warmup_steps`; at update time, if `params` is missing.
      TypeError: for a non-int `warmup_steps`.

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

    def init_fn(params):
        dt = _tree.scalar_dtype(params)
        zero = _tree.zero_count()
        return ScaleByScheduleFreeState(
            count=zero,
            z=jax.tree.map(jnp.copy, params),
            b1=jnp.asarray(_tree.resolve(b1, zero), dt),
            weight_sum=jnp.zeros([], dt),
            max_lr=jnp.zeros([], dt),
        )

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise _protocol.missing_params(fn)
        dt = state.max_lr.dtype
        lr = _warmed_up(learning_rate, state.count, warmup_steps, dt)
        beta = jnp.asarray(_tree.resolve(b1, state.count), dt)
        prev_beta = state.b1  # x_t from the b1 that made y_t (a schedule or an injected value may change it)
        max_lr = jnp.maximum(state.max_lr, lr)
        weight = max_lr ** jnp.asarray(_tree.resolve(weight_lr_power, state.count), dt)
        weight_sum = state.weight_sum + weight
        c = jnp.where(weight_sum > 0, weight / jnp.where(weight_sum > 0, weight_sum, 1), 0)

        def leaf(d, z, y):
            new_z = (z + _tree.like(-lr, d) * d).astype(z.dtype)
            x = (y - _tree.like(1 - prev_beta, z) * z) / _tree.like(prev_beta, z)
            ck = _tree.like(c, z)
            x = (1 - ck) * x + ck * new_z
            y_new = _tree.like(beta, z) * x + _tree.like(1 - beta, z) * new_z
            return (y_new - y).astype(d.dtype), new_z

        out, z = _tree.split_map(
            fn, leaf, 2, sparse.densify(updates), state.z, params, names=("updates", "state.z", "params")
        )
        beta = _vma.typed_like(beta, state.b1)  # recomputed from the hyperparameter: keep init's type
        return out, ScaleByScheduleFreeState(_tree.increment(state.count), z, beta, weight_sum, max_lr)

    return _protocol.ElementWise(init_fn, update_fn)


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
        b1 = _tree.like(found.b1, z)
        return ((y - _tree.like(1 - found.b1, z) * z) / b1).astype(y.dtype)

    return _tree.map_leaves(leaf, params, found.z)
