"""optax's other scalings (SM3, factored RMS, RMS, RSS, Rprop, trace, EMA) under optax's names and layouts.

As `_transforms`: each is a gradtx rule given optax's state class by `restated`; and optax's
`clip_by_global_norm`, gradtx's clip in optax's `EmptyState`.
"""

from __future__ import annotations

from typing import Any

import gradtx
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.rule import restated
from gradtx.combinators._clip import clip_to_global_norm
from gradtx.optax_compat import _states


@_factory.api
def scale_by_sm3(b1: Any = 0.9, b2: Any = 1.0, eps: Any = 1e-8) -> _protocol.GradientTransformation:
    """optax's `scale_by_sm3`: `gradtx.scale_by_sm3` in `ScaleBySM3State(mu, nu)` (no count).

    Args:
      b1: decay of the momentum, in [0, 1].
      b2: decay of the accumulators, in [0, 1].
      eps: added to the accumulators under the root, >= 0.

    Returns:
      A `LeafWise` transform with state `ScaleBySM3State(mu, nu)`.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_sm3().init(jnp.zeros(2))._fields
        ('mu', 'nu')
    """
    inner = gradtx.scale_by_sm3(b1, b2, eps)
    return restated(inner, _states.ScaleBySM3State, {"accumulators": "mu", "momentum": "nu"})


@_factory.api
def scale_by_factored_rms(
    factored: bool = True,
    decay_rate: Any = 0.8,
    step_offset: int = 0,
    min_dim_size_to_factor: int = 128,
    epsilon: Any = 1e-30,
    decay_rate_fn: Any = None,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_factored_rms`: `gradtx.scale_by_factored_rms` in `FactoredState(count, v_row, v_col,
    v)`.

    Args:
      factored: factor the second moment of leaves with two large enough dimensions.
      decay_rate: the exponent of the decay schedule `1 - (t + 1)^(-decay_rate)`.
      step_offset: subtracted from the step in the decay.
      min_dim_size_to_factor: only factor dimensions at least this large.
      epsilon: added to the squared gradients.
      decay_rate_fn: `(step, decay_rate) -> decay` (default: optax's power law).

    Returns:
      A `LeafWise` transform with state `FactoredState(count, v_row, v_col, v)`.

    Raises:
      ValueError: for a negative epsilon or a non-positive `min_dim_size_to_factor`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_factored_rms().init(jnp.zeros(2))._fields
        ('count', 'v_row', 'v_col', 'v')
    """
    inner = gradtx.scale_by_factored_rms(
        factored, decay_rate, step_offset, min_dim_size_to_factor, epsilon, decay_rate_fn=decay_rate_fn
    )
    return restated(inner, _states.FactoredState)


@_factory.api
def trace(
    decay: Any, nesterov: bool = False, accumulator_dtype: Any = None
) -> _protocol.GradientTransformation:
    """optax's `trace` (heavy-ball momentum, `t = g + decay t`): `gradtx.trace` in `TraceState(trace)`.

    Args:
      decay: the momentum, in [0, 1].
      nesterov: output `g + decay t` (Nesterov) instead of `t`.
      accumulator_dtype: dtype of `trace` (default: each param's dtype).

    Returns:
      An `ElementWise` transform with state `TraceState(trace)` (no count, as optax's).

    Raises:
      ValueError: for a decay outside [0, 1].

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.trace(0.9).init(jnp.zeros(2))
        TraceState(trace=Array([0., 0.], dtype=float32))
    """
    inner = gradtx.trace(decay, nesterov=nesterov, mu_dtype=accumulator_dtype)
    return restated(inner, _states.TraceState, {"momentum": "trace"})


@_factory.api
def ema(decay: Any, debias: bool = True, accumulator_dtype: Any = None) -> _protocol.GradientTransformation:
    """optax's `ema` (debiased by default, as optax's): `gradtx.ema` with optax's defaults.

    Args:
      decay: the decay of the average, in [0, 1].
      debias: divide by `1 - decay^t` (optax's default: True).
      accumulator_dtype: dtype of `ema` (default: each param's dtype).

    Returns:
      An `ElementWise` transform with state `EmaState(count, ema)`.

    Raises:
      ValueError: for a decay outside [0, 1].

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.ema(0.5)
        >>> tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0]  # debiased: the first value itself
        Array([2.], dtype=float32)
    """
    return gradtx.ema(decay, debias=debias, mu_dtype=accumulator_dtype)


@_factory.api
def scale_by_rms(
    decay: Any = 0.9,
    eps: Any = 1e-8,
    initial_scale: Any = 0.0,
    eps_in_sqrt: bool = True,
    bias_correction: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_rms`: `gradtx.scale_by_rms` in `ScaleByRmsState(nu)` (a count if bias-corrected).

    Args:
      decay: the decay of the second moment, in [0, 1].
      eps: added to the mean square (or to its root), >= 0.
      initial_scale: the second moment's initial value, >= 0.
      eps_in_sqrt: add `eps` under the root (the default) or to it.
      bias_correction: divide the second moment by `1 - decay^t`.

    Returns:
      An `ElementWise` transform with optax's state layout.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative `eps` / `initial_scale`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_rms().init(jnp.zeros(2))
        ScaleByRmsState(nu=Array([0., 0.], dtype=float32))
    """
    inner = gradtx.scale_by_rms(decay, eps, initial_scale, eps_in_sqrt, bias_correction)
    return restated(inner, _states.ScaleByRmsWithCountState if bias_correction else _states.ScaleByRmsState)


@_factory.api
def scale_by_stddev(
    decay: Any = 0.9,
    eps: Any = 1e-8,
    initial_scale: Any = 0.0,
    eps_in_sqrt: bool = True,
    bias_correction: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_stddev`: `gradtx.scale_by_stddev` in `ScaleByRStdDevState(mu, nu)` (with a count when
    bias-corrected).

    Args:
      decay: the decay of both moments, in [0, 1].
      eps: added to the variance (or to its root), >= 0.
      initial_scale: the second moment's initial value, >= 0.
      eps_in_sqrt: add `eps` under the root (the default) or to it.
      bias_correction: divide both moments by `1 - decay^t`.

    Returns:
      An `ElementWise` transform with optax's state layout.

    Raises:
      ValueError: for a decay outside [0, 1] or a negative `eps` / `initial_scale`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_stddev().init(jnp.zeros(1))
        ScaleByRStdDevState(mu=Array([0.], dtype=float32), nu=Array([0.], dtype=float32))
    """
    inner = gradtx.scale_by_stddev(decay, eps, initial_scale, eps_in_sqrt, bias_correction)
    state = _states.ScaleByRStdDevWithCountState if bias_correction else _states.ScaleByRStdDevState
    return restated(inner, state)


@_factory.api
def scale_by_rss(initial_accumulator_value: Any = 0.1, eps: Any = 1e-7) -> _protocol.GradientTransformation:
    """optax's `scale_by_rss`: `gradtx.scale_by_rss` in `ScaleByRssState(sum_of_squares)`.

    Args:
      initial_accumulator_value: the sum's initial value, >= 0.
      eps: added to the sum under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByRssState(sum_of_squares)`.

    Raises:
      ValueError: for a negative `initial_accumulator_value` or `eps`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_rss().init(jnp.zeros(1))
        ScaleByRssState(sum_of_squares=Array([0.1], dtype=float32))
    """
    return restated(gradtx.scale_by_rss(initial_accumulator_value, eps), _states.ScaleByRssState)


@_factory.api
def scale_by_rprop(
    learning_rate: Any,
    eta_minus: Any = 0.5,
    eta_plus: Any = 1.2,
    min_step_size: Any = 1e-6,
    max_step_size: Any = 50.0,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_rprop`: `gradtx.scale_by_rprop` in `ScaleByRpropState(step_sizes, prev_updates)`.

    The state equals optax's step for step; the update is this step's, the one the state
    stores, where optax 0.2.8 returns the previous step's (a deliberate difference).

    Args:
      learning_rate: the initial step size.
      eta_minus: the step-size factor after a sign change, in (0, 1].
      eta_plus: the step-size factor otherwise, >= 1.
      min_step_size: the smallest step size.
      max_step_size: the largest step size.

    Returns:
      An `ElementWise` transform with state `ScaleByRpropState(step_sizes, prev_updates)`.

    Raises:
      ValueError: for factors or step sizes out of range.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_rprop(0.1).init(jnp.zeros(1))._fields
        ('step_sizes', 'prev_updates')
    """
    inner = gradtx.scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size, max_step_size)
    return restated(inner, _states.ScaleByRpropState)


@_factory.api
def scale_by_adadelta(rho: Any = 0.9, eps: Any = 1e-6) -> _protocol.GradientTransformation:
    """optax's `scale_by_adadelta`: `gradtx.scale_by_adadelta` (TF's ApplyAdadelta, the same formula) in
    `ScaleByAdaDeltaState(e_g, e_x)`.

    Args:
      rho: the decay of both moving averages, in [0, 1].
      eps: added under both roots, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByAdaDeltaState(e_g, e_x)` (no count, as optax's).

    Raises:
      ValueError: for a decay outside [0, 1] or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_adadelta().init(jnp.zeros(1))._fields
        ('e_g', 'e_x')
    """
    inner = gradtx.scale_by_adadelta(rho, eps)
    return restated(inner, _states.ScaleByAdaDeltaState, {"accum": "e_g", "accum_update": "e_x"})


@_factory.api
def scale_by_learning_rate(
    learning_rate: Any = None, *, flip_sign: bool = True
) -> _protocol.GradientTransformation:
    """optax's `scale_by_learning_rate`: `gradtx.scale_by_learning_rate`, and `identity()` for None (optax's).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule), or None for no scaling.
      flip_sign: multiply by `-learning_rate` (descent) rather than `learning_rate`.

    Returns:
      A transform: `scale`, `scale_by_schedule` or `identity()`.

    Raises:
      TypeError: for a learning rate that is not a number, a scalar array, a schedule or None.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.scale_by_learning_rate(0.1)
        >>> tx.update(jnp.ones(1), tx.init(jnp.ones(1)))[0]
        Array([-0.1], dtype=float32)
    """
    if learning_rate is None:
        return gradtx.identity()
    return gradtx.scale_by_learning_rate(learning_rate, flip_sign=flip_sign)


@_factory.api
def clip_by_global_norm(max_norm: Any) -> _protocol.GradientTransformation:
    """optax's `clip_by_global_norm`: `gradtx.clip_by_global_norm`'s clip with optax's `EmptyState`.

    The updates are scaled together so their global L2 norm is at most `max_norm` (the
    arithmetic is gradtx's, `u * (c * min(1/n, 1/c))`, equal to optax's `u / n * c` to
    rounding). The state is optax's `EmptyState()`: gradtx's keeps a count and the last norm.

    Args:
      max_norm: the largest allowed global norm, >= 0 (a number or a scalar array, as optax's; 0
        zeroes the updates, as optax's does).

    Returns:
      An `ElementWise` transform with state `EmptyState()`.

    Raises:
      TypeError: for a schedule (`gradtx.clip_by_global_norm` takes one).
      ValueError: for a negative `max_norm`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.clip_by_global_norm(1.0)
        >>> tx.update({"a": jnp.array([3.0]), "b": jnp.array([4.0])}, tx.init(None))[0]
        {'a': Array([0.6], dtype=float32), 'b': Array([0.8], dtype=float32)}
    """
    if _checks.is_schedule(max_norm):
        raise TypeError(
            f"`clip_by_global_norm`: optax's takes a number or a scalar array as `max_norm`, got the "
            f"schedule {max_norm!r}; `gradtx.clip_by_global_norm` takes schedules (its state keeps a count)."
        )
    _checks.check_nonnegative("clip_by_global_norm", "max_norm", max_norm)  # optax's own tests step with 0
    clip = gradtx.stateless(lambda updates, params: clip_to_global_norm(updates, max_norm)[0])
    return _protocol.ElementWise(*clip)
