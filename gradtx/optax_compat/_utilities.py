"""optax's numerics, linear algebra and small utilities under optax's names: gradtx's functions, no math.

`apply_every` is `gradtx.apply_every` in optax's `ApplyEvery(count, grad_acc)`, whose `count`
is the number of updates since the last emitted one (gradtx counts every update: optax's is
that modulo `k`). `lookahead` is optax's, its params `LookaheadParams(fast, slow)`, from the
synchronisation step `gradtx.lookahead` uses (`gradtx.combinators._lookahead.sync_step`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import gradtx
from gradtx import linalg, numerics, sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.rule import restated
from gradtx.combinators._lookahead import sync_step

MultiNormalDiagFromLogScale = numerics.MultiNormalDiagFromLogScale
multi_normal = numerics.multi_normal
safe_increment = numerics.safe_increment
safe_int32_increment = numerics.safe_int32_increment
safe_norm = numerics.safe_norm
safe_root_mean_squares = numerics.safe_root_mean_squares
scale_gradient = numerics.scale_gradient
power_iteration = linalg.power_iteration
nnls = linalg.nnls


def matrix_inverse_pth_root(
    matrix: Any,
    p: int,
    num_iters: Any = 100,
    ridge_epsilon: Any = 1e-6,
    error_tolerance: Any = 1e-6,
    precision: Any = jax.lax.Precision.HIGHEST,
) -> tuple[Any, Any]:
    """optax's `matrix_inverse_pth_root`: `gradtx.linalg.matrix_inverse_pth_root`, with optax's Newton power.

    optax 0.2.8's Newton step takes the power `2 ** round(log2(p))` of its iterate (1, 2, 4
    or 8: a `lax.switch` over those four), which is `p` for p = 1, 2, 4, 8 only: for
    another `p` the iteration does not converge to the p-th root (p = 3 takes 4th powers).
    This function reproduces that; `gradtx.linalg.matrix_inverse_pth_root` takes the `p`-th
    power for every `p`, and the two agree for p = 1, 2, 4, 8.

    Args:
      matrix: a symmetric PSD `(n, n)` matrix.
      p: the root, an int >= 1.
      num_iters: the largest number of Newton steps.
      ridge_epsilon: the ridge, relative to the largest eigenvalue.
      error_tolerance: stop once max|M - I| is at most this.
      precision: the matrix products' precision (`jax.lax.Precision`).

    Returns:
      `(root, error)`, as optax's.

    Raises:
      TypeError / ValueError: for a non-int `p` or `p < 1`, a non-square `matrix`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> root, _ = optax.matrix_inverse_pth_root(jnp.diag(jnp.array([4.0, 16.0])), 2)
        >>> [round(float(x), 4) for x in jnp.diag(root)]
        [0.5, 0.25]
    """
    _checks.check_int("matrix_inverse_pth_root", "p", p, minimum=1)
    power = 2 ** min(round(math.log2(p)), 3)  # optax's lax.switch index, clipped to its 4 branches
    return linalg.inverse_pth_root(
        matrix, p, num_iters, ridge_epsilon, error_tolerance, precision, power=power
    )


class ApplyEvery(NamedTuple):
    """State of `apply_every` (optax's layout)."""

    count: Any  # int32: updates since the last emitted sum, in [0, k)
    grad_acc: Any  # their sum


@_factory.api
def apply_every(k: int = 1) -> _protocol.GradientTransformation:
    """optax's `apply_every`: `gradtx.apply_every(k)` with its state in `ApplyEvery(count, grad_acc)`.

    Args:
      k: emit the accumulated sum every `k` steps (an int >= 1).

    Returns:
      A transform with state `ApplyEvery(count, grad_acc)`, `count` in [0, k).

    Raises:
      TypeError / ValueError: for a non-int `k` or `k < 1`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.apply_every(2)
        >>> state = tx.init(jnp.zeros(1))
        >>> for g in (1.0, 3.0):
        ...     u, state = tx.update(jnp.array([g]), state)
        >>> u, state.count, state.grad_acc
        (Array([4.], dtype=float32), Array(0, dtype=int32), Array([4.], dtype=float32))
    """
    inner = restated(gradtx.apply_every(k), ApplyEvery)

    def update_fn(updates, state, params=None, **extra_args):
        out, new = inner.update(updates, state, params, **extra_args)
        return out, new._replace(count=new.count % k)  # optax keeps the phase only

    return _factory.composite(inner.init, update_fn, inner)


class LookaheadState(NamedTuple):
    """State of `lookahead` (optax's layout)."""

    fast_state: Any  # the fast optimizer's state
    steps_since_sync: Any  # int32: fast steps since the last synchronisation, in [0, sync_period)


class LookaheadParams(NamedTuple):
    """The params of `lookahead`: the fast weights (differentiate at these) and the slow ones (evaluate)."""

    fast: Any
    slow: Any

    @classmethod
    def init_synced(cls, params: Any) -> LookaheadParams:
        """Fast and slow weights both `params`."""
        return cls(slow=params, fast=params)


def lookahead(  # not `_factory.api`: its params (`LookaheadParams`) are not shaped like its updates
    fast_optimizer: Any, sync_period: int, slow_step_size: Any, reset_state: bool = False
) -> _protocol.GradientTransformation:
    """optax's `lookahead`: the params are `LookaheadParams(fast, slow)`, the updates too.

    `gradtx.lookahead`'s synchronisation (`gradtx.combinators._lookahead.sync_step`) with
    the slow weights in the params rather than in the state: the update of `slow` is its
    step (0 between synchronisations), so `apply_updates(params, updates)` moves both. With
    `reset_state`, the fast optimizer's state is re-initialised at each synchronisation from
    `params.fast` as given to that step (optax's; `gradtx.lookahead` initialises it at the
    synchronised weights: the same for optimizers whose initial state does not read the
    params' values).

    Args:
      fast_optimizer: the fast optimizer.
      sync_period: `k`, the number of fast steps per synchronisation (an int >= 1).
      slow_step_size: the slow weights' step size, in [0, 1].
      reset_state: re-initialise the fast optimizer's state at each synchronisation.

    Returns:
      A transform with state `LookaheadState(fast_state, steps_since_sync)`, whose params
      and updates are `LookaheadParams`.

    Raises:
      TypeError / ValueError: for a bad `fast_optimizer`, `sync_period`, `slow_step_size` or
        `reset_state`; at update time, `ValueError` without `params`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.lookahead(optax.sgd(1.0), sync_period=2, slow_step_size=0.5)
        >>> params = optax.LookaheadParams.init_synced(jnp.zeros(1))
        >>> state = tx.init(params)
        >>> for _ in range(2):
        ...     updates, state = tx.update(jnp.array([-1.0]), state, params)
        ...     params = optax.apply_updates(params, updates)
        >>> params.fast, params.slow  # fast reached 2, then both moved to 0 + 0.5 * 2
        (Array([1.], dtype=float32), Array([1.], dtype=float32))
    """
    fn = "lookahead"
    _checks.check_transform(fn, "fast_optimizer", fast_optimizer)
    _checks.check_int(fn, "sync_period", sync_period, minimum=1)
    _checks.check_finite(fn, "slow_step_size", slow_step_size)
    _checks.check_in_range(fn, "slow_step_size", slow_step_size, 0.0, 1.0)
    _checks.check_bool(fn, "reset_state", reset_state)
    inner = _factory.member(fast_optimizer)

    def init_fn(params):
        fast = params.fast if isinstance(params, LookaheadParams) else params  # optax: fast weights alone too
        return LookaheadState(inner.init(fast), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        fast_updates, fast_state = inner.update(updates, state.fast_state, params.fast, **extra_args)
        sync = state.steps_since_sync == sync_period - 1
        pairs = jax.tree.map(
            lambda u, f, s: sync_step(u, f, s, sync, slow_step_size),
            sparse.densify(fast_updates),
            params.fast,
            params.slow,
        )
        fast_out, slow_out = jax.tree.transpose(
            jax.tree.structure(params.fast), jax.tree.structure((0, 0)), pairs
        )
        if reset_state:
            fast_state = gradtx.tree.where(sync, inner.init(params.fast), fast_state)
        steps = (state.steps_since_sync + 1) % sync_period
        return LookaheadParams(fast_out, slow_out), LookaheadState(fast_state, steps.astype(jnp.int32))

    return _factory.composite(init_fn, update_fn, inner)
