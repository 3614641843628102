"""optax's Adam-like building blocks under optax's names, signatures and state layouts, with optax's numbers.

Each is a gradtx rule (the formula in `gradtx.transforms`) given optax's state class by
`gradtx._core.rule.restated`, which costs nothing per step.
"""

from __future__ import annotations

from typing import Any

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.rule import restated
from gradtx.optax_compat import _states

_MOMENTS = {"m": "mu", "v": "nu"}


@_factory.api
def scale_by_adam(
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_adam`: `gradtx.scale_by_bias_corrected_adam` in `ScaleByAdamState(count, mu, nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      mu_dtype: dtype of `mu` (default: each param's dtype).
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState(count, mu, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> tx = optax.scale_by_adam()
        >>> tx.init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    inner = gradtx.scale_by_bias_corrected_adam(b1, b2, eps, eps_root, nesterov=nesterov, mu_dtype=mu_dtype)
    return restated(inner, _states.ScaleByAdamState, _MOMENTS)


@_factory.api
def scale_by_radam(
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    threshold: Any = 5.0,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_radam`: `gradtx.scale_by_radam` in `ScaleByAdamState(count, mu, nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      threshold: the length of the approximated SMA above which the step is rectified.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_radam().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    inner = gradtx.scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov)
    return restated(inner, _states.ScaleByAdamState, _MOMENTS)


@_factory.api
def scale_by_belief(
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-16,
    eps_root: Any = 1e-16,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_belief`: `gradtx.scale_by_belief` in `ScaleByBeliefState(count, mu, nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the belief (second central moment), in [0, 1).
      eps: added to the root of the corrected belief, >= 0.
      eps_root: added to the corrected belief under the root, >= 0.
      nesterov: use Nesterov's form of the first moment.

    Returns:
      An `ElementWise` transform with state `ScaleByBeliefState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_belief().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    inner = gradtx.scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov)
    return restated(inner, _states.ScaleByBeliefState, {"m": "mu", "s": "nu"})


@_factory.api
def scale_by_yogi(
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-3,
    eps_root: Any = 0.0,
    initial_accumulator_value: Any = 1e-6,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_yogi`: `gradtx.scale_by_yogi` in `ScaleByAdamState(count, mu, nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the second moment, >= 0.
      eps_root: added to the second moment under the root, >= 0.
      initial_accumulator_value: the moments' initial value.

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_yogi().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    inner = gradtx.scale_by_yogi(b1, b2, eps, eps_root, initial_accumulator_value)
    return restated(inner, _states.ScaleByAdamState, _MOMENTS)


@_factory.api
def scale_by_lion(
    b1: Any = 0.9, b2: Any = 0.99, mu_dtype: Any = None, *, mode: str = "hard", smooth_beta: float = 1.0
) -> _protocol.GradientTransformation:
    """optax's `scale_by_lion`: `gradtx.scale_by_lion` in `ScaleByLionState(count, mu)`.

    Args:
      b1: the interpolation between momentum and gradient that is signed, in [0, 1].
      b2: decay of the momentum, in [0, 1].
      mu_dtype: dtype of `mu` (default: each param's dtype).
      mode: `"hard"` (the sign), `"smooth"` (`tanh(smooth_beta x)`) or `"refined"` (`x` where
        `|x| < 1`, else its sign).
      smooth_beta: the slope of `mode="smooth"`, > 0.

    Returns:
      An `ElementWise` transform with state `ScaleByLionState(count, mu)`.

    Raises:
      ValueError: for a beta outside [0, 1], an unknown `mode` (here, not at the first update
        as optax) or a non-positive `smooth_beta`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_lion().init(jnp.zeros(2))._fields
        ('count', 'mu')
    """
    inner = gradtx.scale_by_lion(b1, b2, mu_dtype=mu_dtype, mode=mode, smooth_beta=smooth_beta)
    return restated(inner, _states.ScaleByLionState, {"m": "mu"})


@_factory.api
def scale_by_novograd(
    b1: Any = 0.9,
    b2: Any = 0.25,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    weight_decay: Any = 0.0,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_novograd`: `gradtx.scale_by_novograd` in `ScaleByNovogradState(count, mu, nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the per-leaf second moment, in [0, 1).
      eps: added to the root of the second moment, >= 0.
      eps_root: added to the second moment under the root, >= 0.
      weight_decay: decay added to the normalised gradient.
      mu_dtype: dtype of `mu` (default: each param's dtype).

    Returns:
      A `LeafWise` transform with state `ScaleByNovogradState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_novograd().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    inner = gradtx.scale_by_novograd(b1, b2, eps, eps_root, weight_decay, mu_dtype=mu_dtype)
    return restated(inner, _states.ScaleByNovogradState, _MOMENTS)


@_factory.api
def scale_by_adan(
    b1: Any = 0.98, b2: Any = 0.92, b3: Any = 0.99, eps: Any = 1e-8, eps_root: Any = 0.0
) -> _protocol.GradientTransformation:
    """optax's `scale_by_adan`: `gradtx.scale_by_adan` in `ScaleByAdanState(m, v, n, g, t)`.

    Args:
      b1: decay of the gradients' moment, in [0, 1).
      b2: decay of the gradient differences' moment, in [0, 1).
      b3: decay of the second moment, in [0, 1).
      eps: added to the root of the second moment, >= 0.
      eps_root: added to the second moment under the root, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByAdanState(m, v, n, g, t)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_adan().init(jnp.zeros(2))._fields
        ('m', 'v', 'n', 'g', 't')
    """
    inner = gradtx.scale_by_adan(b1, b2, b3, eps, eps_root)
    return restated(inner, _states.ScaleByAdanState, {"count": "t", "prev_grad": "g"})


@_factory.api
def scale_by_amsgrad(
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    bias_correction_mu: bool = True,
    bias_correction_nu: bool = True,
) -> _protocol.GradientTransformation:
    """optax's `scale_by_amsgrad`: `gradtx.scale_by_bias_corrected_amsgrad` in `ScaleByAmsgradState(count, mu,
    nu, nu_max)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root, >= 0.
      eps_root: added under the root, >= 0.
      mu_dtype: dtype of `mu` (default: each param's dtype).
      bias_correction_mu: divide the first moment by `1 - b1^t`.
      bias_correction_nu: divide the second moment by `1 - b2^t` before the maximum.

    Returns:
      An `ElementWise` transform with state `ScaleByAmsgradState(count, mu, nu, nu_max)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_amsgrad().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu', 'nu_max')
    """
    inner = gradtx.scale_by_bias_corrected_amsgrad(
        b1,
        b2,
        eps,
        eps_root,
        mu_dtype=mu_dtype,
        bias_correction_mu=bias_correction_mu,
        bias_correction_nu=bias_correction_nu,
    )
    return restated(inner, _states.ScaleByAmsgradState, {**_MOMENTS, "v_max": "nu_max"})


@_factory.api
def scale_by_adamax(b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8) -> _protocol.GradientTransformation:
    """optax's `scale_by_adamax`: `gradtx.scale_by_bias_corrected_adamax` in `ScaleByAdamState(count, mu,
    nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the infinity norm, in [0, 1).
      eps: added to each gradient's magnitude, >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> optax.scale_by_adamax().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    return restated(gradtx.scale_by_bias_corrected_adamax(b1, b2, eps), _states.ScaleByAdamState, _MOMENTS)
