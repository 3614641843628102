"""Steps that wait for several gradients (`accumulate_gradients`, optax's MultiSteps), and the skip rules
it takes (`skip_not_finite`, `skip_large_updates`)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core import walk as _walk
from gradtx.combinators import _carry


class AccumulateGradientsState(NamedTuple):
    """State of `accumulate_gradients`."""

    count: _protocol.Count  # int32: applied updates (the inner transform's steps), saturating
    mini_step: jax.Array  # int32: gradients accumulated since the last applied update, in [0, every_k)
    accumulator: _protocol.Updates  # their sum, one leaf per parameter (in the accumulator dtype)
    inner_state: Any  # the inner transform's state; it advances once per applied update
    skip_state: Any  # what `should_skip_update_fn` returned for the last gradient (() without one)


def skip_not_finite(updates: Any, gradient_step: jax.Array, params: Any) -> tuple[jax.Array, dict]:
    """A `should_skip_update_fn` for `accumulate_gradients`: skip gradients with a NaN or an infinity.

    Args:
      updates: the incoming gradients.
      gradient_step: the number of updates applied so far (unused).
      params: the parameters (unused).

    Returns:
      `(skip, state)`: whether to skip, and `{"should_skip": ..., "num_not_finite": ...}`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> skip, info = gradtx.skip_not_finite(jnp.array([1.0, jnp.nan]), 0, None)
        >>> bool(skip), int(info["num_not_finite"])
        (True, 1)
    """
    del gradient_step, params
    leaves = [x for x in jax.tree.leaves(updates) if jnp.issubdtype(x.dtype, jnp.inexact)]
    bad = _sliced.total(
        sum((jnp.sum(~jnp.isfinite(x)).astype(jnp.int32) for x in leaves), jnp.zeros([], jnp.int32))
    )
    return bad > 0, {"should_skip": bad > 0, "num_not_finite": bad}


def skip_large_updates(
    updates: Any, gradient_step: jax.Array, params: Any, max_squared_norm: float
) -> tuple[jax.Array, dict]:
    """A `should_skip_update_fn` for `accumulate_gradients`: skip gradients whose squared norm is too large.

    Bind `max_squared_norm` first: `functools.partial(skip_large_updates, max_squared_norm=1e6)`.
    A non-finite norm is skipped too.

    Args:
      updates: the incoming gradients.
      gradient_step: the number of updates applied so far (unused).
      params: the parameters (unused).
      max_squared_norm: the largest squared global norm accepted.

    Returns:
      `(skip, state)`: whether to skip, and `{"should_skip": ..., "norm_squared": ...}`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> skip, info = gradtx.skip_large_updates(jnp.array([3.0, 4.0]), 0, None, max_squared_norm=20.0)
        >>> bool(skip), float(info["norm_squared"])
        (True, 25.0)
    """
    del gradient_step, params
    norm_squared = _formulas.global_norm(updates) ** 2
    skip = jnp.logical_or(jnp.isnan(norm_squared), norm_squared > max_squared_norm)
    return skip, {"should_skip": skip, "norm_squared": norm_squared}


def has_updated(state: AccumulateGradientsState) -> jax.Array:
    """Whether the last `update` of `accumulate_gradients` applied the inner transform (optax's).

    Args:
      state: an `AccumulateGradientsState`.

    Returns:
      A bool scalar.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=2)
        >>> s = tx.init(jnp.zeros(1))
        >>> _, s = tx.update(jnp.ones(1), s)
        >>> bool(gradtx.has_updated(s))
        False
        >>> _, s = tx.update(jnp.ones(1), s)
        >>> bool(gradtx.has_updated(s))
        True
    """
    if not isinstance(state, AccumulateGradientsState):
        raise TypeError(
            f"`has_updated`: `state` must be an AccumulateGradientsState, got {type(state).__name__}."
        )
    return jnp.logical_and(state.mini_step == 0, state.count > 0)


def _accumulator_dtype(p: Any, dtype: Any) -> Any:
    """The accumulator's dtype for param `p`: `dtype`, or the wider of the param's and float32."""
    return jnp.dtype(dtype) if dtype is not None else jnp.promote_types(p.dtype, jnp.float32)


def _like(new: Any, old: Any) -> Any:
    """`new` cast leaf by leaf to the dtypes of `old` (so both branches of a `cond` agree); a Python number
    in `old` (a value put in the state by `optax.tree.set`) stands for its default dtype."""
    return jax.tree.map(lambda n, o: jnp.asarray(n, jnp.result_type(o)), new, old)


def _every_k_at(every_k: Any, count: jax.Array) -> Any:
    """How many gradients the update after `count` applied ones accumulates: `every_k`, or its value at
    `count` for a schedule (an int32 scalar)."""
    if not _checks.is_schedule(every_k):
        return every_k
    k = jnp.asarray(every_k(count))
    if k.shape != () or not jnp.issubdtype(k.dtype, jnp.integer):
        raise TypeError(
            f"`accumulate_gradients`: the `every_k` schedule must return an integer scalar, got "
            f"{k.dtype}{list(k.shape)}; e.g. `lambda count: jnp.minimum(count + 1, 8)`."
        )
    return k.astype(jnp.int32)


@_registry.wrapper()
def accumulate_gradients(
    tx: Any,
    every_k: int | Callable[[jax.Array], Any],
    *,
    use_grad_mean: bool = True,
    should_skip_update_fn: Any = None,
    accumulator_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """Apply `tx` to the mean (or sum) of every `every_k` gradients; zero updates in between.

    Gradient accumulation (a large batch from `every_k` small ones), optax's `MultiSteps`
    (`every_k` is its `every_k_schedule`), with one accumulator tree of memory. The inner
    transform sees one update per `every_k` accumulated gradients, so its own `count` (and
    its schedules) advance once per applied update; `has_updated(state)` says whether the
    last call applied it. `every_k` is an int, or a schedule `count -> k` (the number of
    updates applied so far -> how many gradients the next one accumulates, an integer
    scalar), which lets the effective batch size grow over training, as optax's. Row-sparse
    gradients are densified into the accumulator. A parameter without a gradient (`None`)
    keeps its accumulator. The accumulator is kept in `accumulator_dtype`; by default in the
    wider of each param's dtype and float32, which is `optax.MultiSteps`' float32 accumulator
    for bf16, f16 and f32 params (bf16 params with f32 gradients, or f32 params with bf16
    gradients, accumulate in float32), and float64 for float64 params under x64 (optax
    rounds those to float32). The updates come out in the gradients' dtypes. The mean is
    the sum divided by `every_k` (optax keeps a running mean: the same up to rounding). The
    state keeps its dtypes and structure, so it can be a `lax.scan` carry.
    `should_skip_update_fn(updates, gradient_step, params) -> (skip, skip_state)` (e.g.
    `skip_not_finite`, `skip_large_updates`) drops a gradient: it is not accumulated and
    the step's updates are zero.

    Args:
      tx: the transform to apply to the accumulated gradient.
      every_k: how many gradients to accumulate per update: an int >= 1, or a schedule
        `count -> k` called with the number of updates applied so far (optax's
        `every_k_schedule`; traced: it must return an integer scalar >= 1).
      use_grad_mean: pass the mean of the gradients (True) or their sum (False).
      should_skip_update_fn: an optional function deciding per gradient whether to drop it.
      accumulator_dtype: the dtype of the accumulator (default: see above).

    Returns:
      A `GradientTransformation` with state `AccumulateGradientsState(count, mini_step,
      accumulator, inner_state, skip_state)`.

    Raises:
      TypeError / ValueError: for a bad `tx`, `every_k`, `use_grad_mean`, skip function or
        dtype; at update time, `TypeError` for a schedule that returns no integer scalar.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=2)
        >>> s = tx.init(jnp.zeros(1))
        >>> u1, s = tx.update(jnp.array([1.0]), s)
        >>> u2, s = tx.update(jnp.array([3.0]), s)
        >>> u1, u2
        (Array([0.], dtype=float32), Array([-2.], dtype=float32))
        >>> tx = gradtx.accumulate_gradients(gradtx.sgd(1.0), every_k=lambda count: count + 1)
        >>> s = tx.init(jnp.zeros(1))
        >>> outs = []
        >>> for g in (1.0, 2.0, 4.0):
        ...     u, s = tx.update(jnp.array([g]), s)
        ...     outs.append(float(u[0]))
        >>> outs  # one gradient, then the mean of two
        [-1.0, 0.0, -3.0]
    """
    fn = "accumulate_gradients"
    _checks.check_transform(fn, "tx", tx)
    if not _checks.is_schedule(every_k):
        _checks.check_int(fn, "every_k", every_k, minimum=1)
    _checks.check_bool(fn, "use_grad_mean", use_grad_mean)
    if should_skip_update_fn is not None:
        _checks.check_callable(fn, "should_skip_update_fn", should_skip_update_fn)
    _checks.check_float_dtype(fn, "accumulator_dtype", accumulator_dtype)
    inner = _factory.member(tx)

    def init_fn(params):
        acc = jax.tree.map(
            lambda p: _placement.filled(p, 0, _accumulator_dtype(p, accumulator_dtype)), params
        )
        skip_state = ()
        if should_skip_update_fn is not None:
            _, skip_state = should_skip_update_fn(_placement.zeros_like(params), _hyper.zero_count(), params)
        # two buffers: a donated step must not be handed one buffer twice
        return AccumulateGradientsState(
            _hyper.zero_count(), _hyper.zero_count(), acc, inner.init(params), skip_state
        )

    def update_fn(updates, state, params=None, **extra_args):
        dense = sparse.densify(updates)
        skip, skip_state = jnp.asarray(False), ()
        if should_skip_update_fn is not None:
            skip, skip_state = should_skip_update_fn(dense, state.count, params)
            skip_state = _like(skip_state, state.skip_state)
        k = _every_k_at(every_k, state.count)
        try:
            added = _walk.map_leaves(
                lambda g, a: a if g is None else a + g.astype(a.dtype), dense, state.accumulator
            )
        except (ValueError, TypeError):  # JAX's tree errors name no key path
            raise _protocol.tree_mismatch_error(
                "accumulate_gradients", "updates", updates, "state.accumulator", state.accumulator
            ) from None
        acc = _walk.where(skip, state.accumulator, added)
        mini_step = jnp.where(skip, state.mini_step, state.mini_step + 1).astype(jnp.int32)

        def mean(a):
            return a / (k if isinstance(k, int) else k.astype(a.dtype)) if use_grad_mean else a

        def run(acc, inner_state):
            grads = _walk.map_leaves(lambda g, a: None if g is None else mean(a).astype(g.dtype), dense, acc)
            out, new_inner = inner.update(grads, inner_state, params, **extra_args)
            return sparse.densify(out), jax.tree.map(jnp.zeros_like, acc), new_inner

        out_types, _, inner_types = _placement.eval_shape(run, acc, state.inner_state)  # with sharding types
        # the inner state in the containers the inner transform returns (a plain dict that
        # `optax.tree.set` put where `inject_hyperparams` returns its `Hyperparams`)
        kept = _carry.as_returned(fn, state.inner_state, inner_types)

        def applied(acc, inner_state):
            out, acc, new_inner = run(acc, inner_state)
            return out, acc, _like(new_inner, inner_state)

        def waiting(acc, inner_state):
            return jax.tree.map(_placement.zeros_of, out_types), acc, inner_state  # placed like `applied`'s

        apply = mini_step >= k
        out, acc, inner_state = _control.cond(apply, applied, waiting, acc, kept)
        return out, AccumulateGradientsState(
            count=jnp.where(apply, _hyper.increment(state.count), state.count).astype(jnp.int32),
            mini_step=jnp.where(apply, 0, mini_step).astype(jnp.int32),
            accumulator=acc,
            inner_state=inner_state,
            skip_state=skip_state,
        )

    return _factory.composite(init_fn, update_fn, inner)
