"""optax's `MultiSteps`: gradient accumulation as a class, `gradtx.accumulate_gradients` inside."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

import gradtx
from gradtx._core import protocol as _protocol


class MultiStepsState(NamedTuple):
    """State of `MultiSteps` (optax's layout)."""

    mini_step: Any  # int32: gradients accumulated since the last applied update
    gradient_step: Any  # int32: applied updates (the inner optimizer's steps)
    inner_opt_state: Any  # the inner optimizer's state
    acc_grads: Any  # the accumulated gradients' mean (or sum)
    skip_state: Any  # what `should_skip_update_fn` returned for the last gradient (() without one)


class MultiSteps:
    """optax's `MultiSteps`: apply `opt` to the mean of every `every_k_schedule` gradients, zeros between.

    `gradtx.accumulate_gradients` with optax's signature, defaults (`accumulator_dtype` float32)
    and state layout (`MultiStepsState`, whose `acc_grads` is the running mean of the gradients
    since the last update: gradtx keeps their sum); `gradient_transformation()` gives a transform.

    Args:
      opt: the inner optimizer.
      every_k_schedule: an int, or a schedule `gradient_step -> k`.
      use_grad_mean: apply the mean of the accumulated gradients (else their sum).
      should_skip_update_fn: `(updates, gradient_step, params) -> (skip, skip_state)`: a gradient
        to leave out (`gradtx.skip_not_finite`, `gradtx.skip_large_updates`).
      accumulator_dtype: the accumulator's dtype (optax's default: float32).

    Raises:
      ValueError: for an `every_k_schedule` below 1.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.MultiSteps(optax.sgd(1.0), every_k_schedule=2)
        >>> state = tx.init(jnp.zeros(1))
        >>> for g in (1.0, 3.0):
        ...     u, state = tx.update(jnp.full(1, g), state)
        >>> bool(tx.has_updated(state)), u  # the mean of 1 and 3, times -1
        (True, Array([-2.], dtype=float32))
    """

    def __init__(
        self,
        opt: Any,
        every_k_schedule: int | Callable[[Any], Any],
        use_grad_mean: bool = True,
        should_skip_update_fn: Any = None,
        accumulator_dtype: Any = jnp.float32,
    ) -> None:
        self._opt = opt
        self._mean = use_grad_mean
        self._tx = gradtx.accumulate_gradients(
            opt,
            every_k_schedule,
            use_grad_mean=use_grad_mean,
            should_skip_update_fn=should_skip_update_fn,
            accumulator_dtype=accumulator_dtype,
        )

    def _scale(self, state: Any, acc: Any, *, to_mean: bool) -> Any:
        """gradtx keeps the sum of the gradients since the last update, optax their running mean."""
        if not self._mean:
            return acc
        n = jnp.maximum(state.mini_step, 1)
        return jax.tree.map(lambda a: a / n.astype(a.dtype) if to_mean else a * n.astype(a.dtype), acc)

    def _to_optax(self, state: Any) -> MultiStepsState:
        acc = self._scale(state, state.accumulator, to_mean=True)
        return MultiStepsState(state.mini_step, state.count, state.inner_state, acc, state.skip_state)

    def _to_gradtx(self, state: MultiStepsState) -> Any:
        acc = self._scale(state, state.acc_grads, to_mean=False)
        return gradtx.AccumulateGradientsState(
            state.gradient_step, state.mini_step, acc, state.inner_opt_state, state.skip_state
        )

    @property
    def inner_opt(self) -> Any:
        """The inner optimizer."""
        return self._opt

    def init(self, params: Any) -> MultiStepsState:
        """The initial state for `params`."""
        return self._to_optax(self._tx.init(params))

    def update(
        self, updates: Any, state: MultiStepsState, params: Any = None, **extra_args: Any
    ) -> tuple[Any, MultiStepsState]:
        """Accumulate `updates`; every k-th call, the inner optimizer's updates, else zeros."""
        out, new = self._tx.update(updates, self._to_gradtx(state), params, **extra_args)
        return out, self._to_optax(new)

    def has_updated(self, state: MultiStepsState) -> Any:
        """Whether the last `update` applied the inner optimizer."""
        return gradtx.has_updated(self._to_gradtx(state))

    def gradient_transformation(self) -> _protocol.GradientTransformation:
        """This as a transform (`init`, `update`) for `chain` and `TrainState`."""
        return _protocol.GradientTransformation(self.init, self.update)
