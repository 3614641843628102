"""Lookahead (Zhang et al. 2019): `lookahead` keeps slow weights beside the fast ones; `slow_params`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import updates as _updates
from gradtx._core import walk as _walk


def sync_step(u: Any, fast: Any, slow: Any, sync: Any, alpha: Any) -> tuple[Any, Any]:
    """Lookahead's step for one leaf: `(update of the fast weights, step of the slow weights)`.

    `d = fast + u - slow`; on a synchronising step (`sync` true) the slow weights step by
    `alpha d` and the fast update becomes `u - (1 - alpha) d` (so both end at the same point);
    otherwise the fast update is `u` and the slow step 0. `gradtx.lookahead` (slow weights in
    its state) and optax_compat's `lookahead` (slow weights in `LookaheadParams`) both use it.
    """
    diff = fast.astype(u.dtype) + u - slow.astype(u.dtype)
    return jnp.where(sync, u - (1 - alpha) * diff, u), jnp.where(sync, alpha * diff, 0)


class LookaheadState(NamedTuple):
    """State of `lookahead`: the slow weights beside the fast optimizer's state (`LookaheadParams.slow`)."""

    count: _protocol.Count  # int32: completed fast steps
    slow: _protocol.Updates  # the slow weights, one per parameter (start at the initial parameters)
    inner_state: Any  # the fast optimizer's state


@_registry.wrapper()
def lookahead(
    tx: Any, sync_period: int, slow_step_size: _protocol.ScalarOrSchedule, *, reset_state: bool = False
) -> _protocol.GradientTransformation:
    r"""Take `sync_period` fast steps with `tx`, then pull the slow weights towards the fast ones: Lookahead.

    The parameters you train (and differentiate at) are the fast weights :math:`w`; the
    slow weights :math:`\phi` live in the state. Every step applies `tx`'s update
    :math:`u`; every `sync_period`-th step (:math:`k`) also synchronises:

    .. math::
        d = w + u - \phi, \qquad \phi \leftarrow \phi + \alpha\, d, \qquad
        u \leftarrow u - (1 - \alpha)\, d \quad (\text{so } w + u = \phi)

    the same update as `optax.lookahead` (whose params are a `LookaheadParams(fast, slow)`
    pair; here the params are the fast weights and the slow ones are the state's slot
    `slow`). Evaluate with `slow_params(state)`. With `reset_state` the fast optimizer's
    state is re-initialised (at the synchronised weights) after each synchronisation. A
    row-sparse gradient goes to `tx` as it is (its sparse rule applies); the updates
    returned are dense, since a synchronisation moves every row. Do not change the updates
    after this transform (put it last, or wrap the whole optimizer).

    Args:
      tx: the fast optimizer.
      sync_period: `k`, the number of fast steps per synchronisation (an int >= 1).
      slow_step_size: :math:`\alpha` in [0, 1] (number, scalar array or schedule).
      reset_state: re-initialise `tx`'s state at each synchronisation.

    Returns:
      A `GradientTransformation` with state `LookaheadState(count, slow, inner_state)`,
      `ElementWise` when `tx` is.

    Raises:
      TypeError: for a non-transform `tx`, a non-int `sync_period` or a non-bool `reset_state`.
      ValueError: for `sync_period < 1` or `slow_step_size` outside [0, 1]; at update time, if
        `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lookahead(gradtx.sgd(1.0), sync_period=2, slow_step_size=0.5)
        >>> params = jnp.zeros(1)
        >>> state = tx.init(params)
        >>> for _ in range(2):
        ...     u, state = tx.update(jnp.array([-1.0]), state, params)
        ...     params = gradtx.apply_updates(params, u)
        >>> params, gradtx.slow_params(state)  # fast weights reached 2, then both moved to 0 + 0.5 * 2
        (Array([1.], dtype=float32), Array([1.], dtype=float32))

    References:
      Zhang, Lucas, Hinton, Ba, *Lookahead Optimizer: k steps forward, 1 step back*, NeurIPS 2019.
    """
    fn = "lookahead"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_int(fn, "sync_period", sync_period, minimum=1)
    _checks.check_finite(fn, "slow_step_size", slow_step_size)
    _checks.check_in_range(fn, "slow_step_size", slow_step_size, 0.0, 1.0)
    _checks.check_bool(fn, "reset_state", reset_state)
    inner = _factory.member(tx)

    def init_fn(params):
        slow = jax.tree.map(lambda p: jnp.array(p, copy=True), params)  # its own buffers (donation)
        return LookaheadState(_hyper.zero_count(), slow, inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        fast, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
        sync = (state.count + 1) % sync_period == 0  # this step ends a period of k fast steps
        alpha = _hyper.scalar(_hyper.resolve(slow_step_size, state.count), params)

        def leaf(u, s, p):
            out, slow_step = sync_step(u, p, s, sync, _hyper.like(alpha, u))
            return out, jnp.where(sync, s + slow_step.astype(s.dtype), s)

        out, slow = _walk.split_map(
            fn, leaf, 2, sparse.densify(fast), state.slow, params, names=("updates", "state.slow", "params")
        )
        if reset_state:
            fresh = inner.init(_updates.apply_updates(params, out))
            inner_state = _walk.where(sync, fresh, inner_state)
        return out, LookaheadState(_hyper.increment(state.count), slow, inner_state)

    return _factory.composite(init_fn, update_fn, inner)


def _find(state: Any) -> LookaheadState | None:
    if isinstance(state, LookaheadState):
        return state
    if isinstance(state, tuple) and hasattr(state, "_fields"):
        parts = [getattr(state, f) for f in state._fields]
    elif isinstance(state, (tuple, list)):
        parts = list(state)
    elif isinstance(state, dict):
        parts = list(state.values())
    else:
        return None
    return next((found for part in parts if (found := _find(part)) is not None), None)


def slow_params(state: Any) -> Any:
    """The slow weights kept by a `lookahead` somewhere in `state` (a chain, a wrapper): evaluate with these.

    Args:
      state: a state holding a `LookaheadState`.

    Returns:
      The slow weights, shaped like the params (packed when the params are), as optax's
      `LookaheadParams.slow`.

    Raises:
      ValueError: if `state` holds no `LookaheadState`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.lookahead(gradtx.sgd(1.0), 1, 0.25))
        >>> params = jnp.zeros(1)
        >>> _, state = tx.update(jnp.array([-4.0]), tx.init(params), params)
        >>> gradtx.slow_params(state)  # 0 + 0.25 * (0 + 4 - 0)
        Array([1.], dtype=float32)
    """
    found = _find(state)
    if found is None:
        raise ValueError("`slow_params`: the state holds no `lookahead` state.")
    return found.slow
