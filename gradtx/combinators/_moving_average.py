"""Exponential moving averages of the parameters: `moving_average`, `averaged_params`, `swap_averaged`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import updates as _updates
from gradtx._core import walk as _walk


class MovingAverageState(NamedTuple):
    """State of `moving_average`."""

    count: _protocol.Count  # int32: completed updates (TF's num_updates after the step's increment, - 1)
    averages: _protocol.Updates  # the shadow variables, one per parameter (start at the initial parameters)
    inner_state: Any


@_registry.wrapper()
def moving_average(
    tx: Any, average_decay: _protocol.ScalarOrSchedule = 0.9999, *, num_updates: bool = False
) -> _protocol.GradientTransformation:
    r"""Keep exponential moving averages of the parameters after each step of `tx`: MovingAverageOptimizer.

    After the inner step produces the new parameters :math:`w_t`:

    .. math::
        \delta = \begin{cases} \min\!\big(d, \tfrac{1 + t}{10 + t}\big) & \text{num\_updates} \\
            d \end{cases},
        \qquad a_t = a_{t-1} - (a_{t-1} - w_t)(1 - \delta)

    as `ExponentialMovingAverage.apply` after `apply_gradients` (sequential update, `t` the
    global step after its increment). The averages start at the initial parameters. Use
    `averaged_params(state)` to read them and `swap_averaged(params, state)` to evaluate or
    save with them (the swapping saver). The averages are updated on all rows, so a
    row-sparse update costs O(table) here, as in TF.

    Args:
      tx: the optimizer whose parameters are averaged.
      average_decay: the decay `d` in [0, 1] (number, scalar array or schedule).
      num_updates: use TF's `min(d, (1 + t) / (10 + t))` warm start.

    Returns:
      A `GradientTransformation` with state `MovingAverageState(count, averages, inner_state)`;
      the updates are `tx`'s.

    Raises:
      ValueError: for a decay outside [0, 1]; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.moving_average(gradtx.sgd(1.0), average_decay=0.5)
        >>> params = jnp.zeros(1)
        >>> u, state = tx.update(jnp.array([-2.0]), tx.init(params), params)
        >>> gradtx.apply_updates(params, u), gradtx.averaged_params(state)  # 0 - (0 - 2) * 0.5
        (Array([2.], dtype=float32), Array([1.], dtype=float32))

    References:
      Polyak, Juditsky, *Acceleration of stochastic approximation by averaging*, 1992.
    """
    fn = "moving_average"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_in_range(fn, "average_decay", average_decay, 0.0, 1.0)
    _checks.check_bool(fn, "num_updates", num_updates)
    inner = _factory.member(tx)

    def init_fn(params):
        averages = jax.tree.map(lambda p: jnp.array(p, copy=True), params)  # its own buffers (donation)
        return MovingAverageState(_hyper.zero_count(), averages, inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        out, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
        new_params = _updates.apply_updates(params, out)
        decay = _hyper.scalar(_hyper.resolve(average_decay, state.count), params)
        if num_updates:
            t = _hyper.scalar(state.count + 1, params)  # the step (TF's num_updates)
            decay = jnp.minimum(decay, (1.0 + t) / (10.0 + t))

        def average(a, w):
            return a - (a - w) * _hyper.like(1 - decay, a)

        averages = _walk.map_updates(
            fn, average, state.averages, new_params, names=("state.averages", "params")
        )
        return out, MovingAverageState(_hyper.increment(state.count), averages, inner_state)

    return _factory.composite(init_fn, update_fn, inner)


def _find(state: Any) -> MovingAverageState | None:
    if isinstance(state, MovingAverageState):
        return state
    if _is_state(state):
        parts = [getattr(state, f) for f in state._fields]
    elif isinstance(state, (tuple, list)):
        parts = list(state)
    elif isinstance(state, dict):
        parts = list(state.values())
    else:
        return None
    for part in parts:
        found = _find(part)
        if found is not None:
            return found
    return None


def _is_state(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def averaged_params(state: Any) -> Any:
    """The moving averages kept by a `moving_average` somewhere in `state` (a chain, wrapper, ...).

    Args:
      state: a state holding a `MovingAverageState`.

    Returns:
      The averages, shaped like the params (TF's `ExponentialMovingAverage.average`).

    Raises:
      ValueError: if `state` holds no `MovingAverageState`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.moving_average(gradtx.sgd(1.0), average_decay=0.5)
        >>> params = jnp.zeros(1)
        >>> u, state = tx.update(jnp.array([-2.0]), tx.init(params), params)
        >>> gradtx.averaged_params(state)  # (0 + 2) / 2 after the first step
        Array([1.], dtype=float32)
    """
    found = _find(state)
    if found is None:
        raise ValueError("`averaged_params`: the state holds no `moving_average` state.")
    return found.averages


def _replace(state: Any, new: MovingAverageState) -> Any:
    if isinstance(state, MovingAverageState):
        return new
    if _is_state(state):
        return type(state)(*(_replace(getattr(state, f), new) for f in state._fields))
    if isinstance(state, (tuple, list)):
        return type(state)(_replace(s, new) for s in state)
    if isinstance(state, dict):
        return {k: _replace(v, new) for k, v in state.items()}
    return state


def swap_averaged(params: Any, state: Any) -> tuple[Any, Any]:
    """Swap the parameters and their moving averages: `(averages, state holding the params)`.

    TF's swapping saver: evaluate or checkpoint with the averaged values, then swap back
    (calling it again restores the training parameters and the averages).

    Args:
      params: the current parameters.
      state: a state holding a `MovingAverageState` for them.

    Returns:
      `(averages, state)` where the returned state keeps `params` in place of the averages.

    Raises:
      ValueError: if `state` holds no `MovingAverageState`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.moving_average(gradtx.sgd(1.0), average_decay=0.5)
        >>> params = jnp.zeros(1)
        >>> u, state = tx.update(jnp.array([-2.0]), tx.init(params), params)
        >>> params = gradtx.apply_updates(params, u)
        >>> eval_params, swapped = gradtx.swap_averaged(params, state)
        >>> eval_params, gradtx.swap_averaged(eval_params, swapped)[0]
        (Array([1.], dtype=float32), Array([2.], dtype=float32))
    """
    found = _find(state)
    if found is None:
        raise ValueError("`swap_averaged`: the state holds no `moving_average` state.")
    _walk.flatten_updates("swap_averaged", params, found.averages, names=("params", "averages"))
    return found.averages, _replace(state, found._replace(averages=params))
