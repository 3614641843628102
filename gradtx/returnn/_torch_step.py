"""RETURNN's PyTorch backend's step: `Updater.step`'s gradient processing, the engine's accumulation."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import walk as _walk
from gradtx.combinators import _accumulate, _carry


def clip_grad_norm(updates: Any, max_norm: Any) -> tuple[Any, jax.Array]:
    r"""torch's `clip_grad_norm_`: the gradients times `min(max_norm / (n + 1e-6), 1)`; gives `(clipped, n)`.

    .. math::
        n = \lVert (\lVert g_i \rVert_2)_i \rVert_2, \qquad g_i \leftarrow g_i \min(c / (n + 10^{-6}), 1)

    The norm of the per-tensor norms, as torch computes it, in at least float32; a non-finite
    `n` makes the gradients NaN or zero, as in torch (`error_if_nonfinite=False`).
    """
    norm = total_norm(updates)
    coef = jnp.minimum(jnp.asarray(max_norm, norm.dtype) / (norm + 1e-6), 1.0)

    def leaf(g):
        return (g.astype(coef.dtype) * coef).astype(g.dtype)

    return _walk.map_updates("clip_grad_norm", leaf, updates), norm


def total_norm(updates: Any) -> jax.Array:
    """torch's `get_total_norm` (p=2): the L2 norm of the per-tensor L2 norms (0 for no tensors)."""
    leaves = [x for x in jax.tree.leaves(updates) if x is not None]
    if not leaves:
        return jnp.zeros([], jnp.float32)
    dtype = jnp.result_type(jnp.float32, *[x.dtype for x in leaves])
    norms = jnp.stack([jnp.linalg.norm(x.astype(dtype).ravel()) for x in leaves])
    return jnp.linalg.norm(norms)


class TorchUpdaterState(NamedTuple):
    """State of the step of RETURNN's PyTorch `Updater`."""

    epoch: jax.Array  # int32: the `epoch` extra argument of the last step (0: none given yet)
    invalid_count: jax.Array  # int32: consecutive steps with a non-finite gradient norm
    pre_state: Any  # the noise and value-clip transforms' state
    inner_state: Any  # the optimizer's (or the parameter groups') state


def updater_step(
    inner: Any,
    *,
    pre: Any = None,
    clip_norm: float = 0.0,
    allowed_invalid: int | None = None,
    grad_scaler: bool = False,
) -> _protocol.GradientTransformation:
    """`Updater.step`: `pre` (noise, value clip), `clip_grad_norm_`, the invalid-gradient check, `inner`.

    With `allowed_invalid` set, a step whose gradient norm (after noise and clipping, as
    RETURNN measures it) is not finite is skipped: zero updates, the optimizer state kept, and
    `invalid_count` counts it; a finite one resets the count. RETURNN raises a RuntimeError
    when the count passes `allowed_invalid`; a jitted step cannot raise, so that step's updates
    are NaN (the params become NaN and the run visibly fails) and `invalid_count >
    allowed_invalid` in the state says why. With `grad_scaler`, a step whose incoming gradient
    has a NaN or inf is skipped too (torch's `GradScaler.step`). An `epoch` extra argument (an
    int), when given, resets the count when it changes, as RETURNN's
    `set_current_train_step` does.
    """
    inner = _factory.member(inner)
    pre = None if pre is None else _factory.member(pre)

    def init_fn(params):
        pre_state = _protocol.EmptyState() if pre is None else pre.init(params)
        return TorchUpdaterState(_hyper.zero_count(), _hyper.zero_count(), pre_state, inner.init(params))

    def update_fn(updates, state, params=None, *, epoch=None, **extra_args):
        grads = sparse.densify(updates)
        found_inf = jnp.logical_not(_walk.all_finite(grads)) if grad_scaler else jnp.asarray(False)
        pre_state = state.pre_state
        if pre is not None:
            grads, pre_state = pre.update(grads, pre_state, params, **extra_args)
        norm = None
        if clip_norm:
            grads, norm = clip_grad_norm(grads, clip_norm)
        count, last_epoch = state.invalid_count, state.epoch
        if epoch is not None:
            epoch = jnp.asarray(epoch, jnp.int32)
            count = jnp.where(epoch != last_epoch, 0, count).astype(jnp.int32)
            last_epoch = epoch
        invalid, abort = jnp.asarray(False), jnp.asarray(False)
        if allowed_invalid is not None:
            norm = total_norm(grads) if norm is None else norm
            invalid = jnp.logical_not(jnp.isfinite(norm))
            count = jnp.where(invalid, _hyper.increment(count), 0).astype(jnp.int32)
            abort = invalid & (count > allowed_invalid)
        out, inner_state = inner.update(grads, state.inner_state, params, **extra_args)
        skip = found_inf | invalid
        if grad_scaler or allowed_invalid is not None:
            kept = _carry.as_returned("from_returnn_config", state.inner_state, inner_state)
            inner_state = _walk.where(skip, kept, inner_state)
            out = _walk.map_updates(
                "from_returnn_config",
                lambda u: jnp.where(abort, jnp.nan, jnp.where(skip, jnp.zeros_like(u), u)).astype(u.dtype),
                out,
            )
        return out, TorchUpdaterState(last_epoch, count, pre_state, inner_state)

    members = (inner,) if pre is None else (pre, inner)
    step = _factory.composite(init_fn, update_fn, *members)
    return _protocol.LeafWise(step.init, step.update)  # torch's norm of per-tensor norms reads whole leaves


class TorchAccumulateState(NamedTuple):
    """State of the torch engine's gradient accumulation."""

    epoch: jax.Array  # int32: the `epoch` extra argument of the last step (0: none given yet)
    inner: _accumulate.AccumulateGradientsState


def accumulate(tx: Any, every_k: int) -> _protocol.GradientTransformation:
    """The torch engine's accumulation: `tx` applied to the sum of every `every_k` gradients.

    The engine sums by repeated `backward()` and steps when its counter, reset at each epoch's
    start, reaches `every_k`; gradients left over at an epoch's end are dropped. Given the
    `epoch` extra argument, a changed epoch drops the partial sum here too.
    """
    acc = _accumulate.accumulate_gradients(tx, every_k, use_grad_mean=False)

    def init_fn(params):
        return TorchAccumulateState(_hyper.zero_count(), acc.init(params))

    def update_fn(updates, state, params=None, *, epoch=None, **extra_args):
        inner = state.inner
        if epoch is not None:
            epoch = jnp.asarray(epoch, jnp.int32)
            fresh = epoch != state.epoch
            inner = inner._replace(
                mini_step=jnp.where(fresh, 0, inner.mini_step).astype(jnp.int32),
                accumulator=_walk.where(
                    fresh, jax.tree.map(jnp.zeros_like, inner.accumulator), inner.accumulator
                ),
            )
            extra_args["epoch"] = epoch
        out, inner = acc.update(updates, inner, params, **extra_args)
        return out, TorchAccumulateState(state.epoch if epoch is None else epoch, inner)

    return _factory.composite(init_fn, update_fn, _factory.member(acc))
