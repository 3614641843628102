"""Numerically safe helpers: floored norms with finite gradients at 0, saturating counters, gradient scaling.

optax's `safe_norm`, `safe_root_mean_squares`, `safe_increment` (and `safe_int32_increment`),
`scale_gradient` and `multi_normal`, with optax's signatures and numbers
(`gradtx.optax_compat` gives them under the same names). The counters are gradtx's one
saturating increment (the one `update_rule`'s `count` uses) for integer counters.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import jax.scipy.stats.norm as _normal

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper

__all__ = [
    "MultiNormalDiagFromLogScale",
    "multi_normal",
    "safe_increment",
    "safe_int32_increment",
    "safe_norm",
    "safe_root_mean_squares",
    "scale_gradient",
]


def safe_norm(
    x: Any,
    min_norm: Any,
    ord: int | float | str | None = None,  # noqa: A002  (numpy's and optax's name)
    axis: None | int | tuple[int, ...] = None,
    keepdims: bool = False,
) -> jax.Array:
    r"""`max(norm(x), min_norm)`, with a gradient of 0 (not NaN) where the norm is at or below `min_norm`.

    .. math:: \operatorname{safe\_norm}(x) = \max(\lVert x \rVert_{\mathrm{ord}}, n_0)

    `jnp.maximum(jnp.linalg.norm(x), min_norm)` has a NaN gradient at `x = 0` (the norm's
    derivative is evaluated in both branches); here the norm is taken of ones where it is at
    or below the floor, so the gradient there is 0.

    Args:
      x: an array.
      min_norm: :math:`n_0`, the floor of the norm.
      ord: the order of the norm, as `jnp.linalg.norm`'s (non-zero int, inf, -inf, 'fro', 'nuc').
      axis: the axis (int) or the two matrix axes (tuple) to take the norm over; None: all of `x`
        (a vector norm for 1-D `x`, a matrix norm for 2-D), as `jnp.linalg.norm`'s.
      keepdims: keep the reduced axes with size one.

    Returns:
      The norm, at least `min_norm`.

    Raises:
      TypeError: for a non-bool `keepdims`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> gradtx.numerics.safe_norm(jnp.array([3.0, 4.0]), 1.0)
        Array(5., dtype=float32)
        >>> jax.grad(gradtx.numerics.safe_norm)(jnp.zeros(2), 1.0)  # optax: 0, not NaN
        Array([0., 0.], dtype=float32)

    References:
      optax's `optax.safe_norm`.
    """
    _checks.check_bool("safe_norm", "keepdims", keepdims)
    norm = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=True)
    x = jnp.where(norm <= min_norm, jnp.ones_like(x), x)
    norm = jnp.squeeze(norm, axis=axis) if not keepdims else norm
    masked_norm = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return jnp.where(norm <= min_norm, min_norm, masked_norm)


def safe_root_mean_squares(x: Any, min_rms: Any) -> jax.Array:
    r"""`max(sqrt(mean(|x|**2)), min_rms)`, with a gradient of 0 (not NaN) where the RMS is <= `min_rms`.

    .. math:: \max\Big(\sqrt{\tfrac{1}{n} \textstyle\sum_i |x_i|^2},\ r_0\Big)

    Args:
      x: an array (complex too: `|x|**2` is real).
      min_rms: :math:`r_0`, the floor of the root mean square.

    Returns:
      The root mean square of all of `x`, at least `min_rms`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.numerics.safe_root_mean_squares(jnp.array([3.0, 4.0]), 1.0)  # sqrt(12.5)
        Array(3.535534, dtype=float32)

    References:
      optax's `optax.safe_root_mean_squares`.
    """
    x = jnp.asarray(x)
    rms = jnp.sqrt(jnp.mean(_formulas.abs_sq(x)))
    x = jnp.where(rms <= min_rms, jnp.ones_like(x), x)
    return jnp.where(rms <= min_rms, min_rms, jnp.sqrt(jnp.mean(_formulas.abs_sq(x))))


def safe_increment(count: Any) -> jax.Array:
    """`count + 1`, saturating at the largest value of `count`'s dtype instead of overflowing.

    An integer counter goes through gradtx's one saturating increment (the one every
    `count` in a state uses); a floating-point counter stops at its dtype's largest finite
    value (optax's rule: a NaN or infinite counter becomes that value).

    Args:
      count: an integer or floating-point array (a scalar counter).

    Returns:
      `count + 1` in `count`'s dtype, or that dtype's maximum once reached.

    Raises:
      ValueError: for a dtype that is neither integer nor floating point (bool, complex).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.numerics.safe_increment(jnp.asarray(1, jnp.int32))
        Array(2, dtype=int32)
        >>> gradtx.numerics.safe_increment(jnp.asarray(2147483647, jnp.int32))
        Array(2147483647, dtype=int32)

    References:
      optax's `optax.safe_increment`.
    """
    count = jnp.asarray(count)
    if jnp.issubdtype(count.dtype, jnp.integer):
        return _hyper.increment(count)
    if jnp.issubdtype(count.dtype, jnp.floating):
        top = jnp.asarray(jnp.finfo(count.dtype).max, count.dtype)
        return jnp.where(count < top, count + jnp.asarray(1, count.dtype), top)
    raise ValueError(
        f"`safe_increment`: `count` must have an integer or floating-point dtype, got {count.dtype} "
        f"(e.g. `jnp.zeros([], jnp.int32)`)."
    )


safe_int32_increment = safe_increment
"""optax's older name of `safe_increment` (the same function)."""


@jax.custom_vjp
def _scaled_backward(inputs: Any, scale: Any) -> Any:
    del scale  # read by the backward pass only
    return inputs


def _scaled_backward_fwd(inputs: Any, scale: Any) -> tuple[Any, Any]:
    return inputs, scale


def _scaled_backward_bwd(scale: Any, g: Any) -> tuple[Any, None]:
    return jax.tree.map(lambda g_: g_ * scale, g), None


_scaled_backward.defvjp(_scaled_backward_fwd, _scaled_backward_bwd)


def scale_gradient(inputs: Any, scale: Any) -> Any:
    """`inputs` as they are on the forward pass, their gradient multiplied by `scale` on the backward pass.

    A scale of 1 returns `inputs` themselves, 0 `jax.lax.stop_gradient(inputs)` (no
    backward pass at all), as optax does.

    Args:
      inputs: an array or a tree of arrays.
      scale: the factor applied to the gradient (a number or a scalar array).

    Returns:
      `inputs`, with a scaled gradient.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> jax.grad(lambda x: 3.0 * gradtx.numerics.scale_gradient(x, 0.5))(2.0)
        Array(1.5, dtype=float32, weak_type=True)

    References:
      optax's `optax.scale_gradient`.
    """
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        if scale == 1.0:
            return inputs
        if scale == 0.0:
            return jax.lax.stop_gradient(inputs)
    return _scaled_backward(inputs, scale)


class MultiNormalDiagFromLogScale:
    """A Gaussian with diagonal covariance, parameterised by its mean and the log of its standard deviations.

    optax's `MultiNormalDiagFromLogScale` (what `multi_normal` returns): `sample(shape, key)`
    draws `shape + param_shape` values, `log_prob(x)` sums the log densities over the
    parameter axes, `params` is `[loc, log_scale]` (the parameters a perturbation method
    differentiates), `log_scale` the latter.
    """

    def __init__(self, loc: Any, log_scale: Any):
        self._log_scale = jnp.asarray(log_scale)
        self._scale = jnp.exp(log_scale)
        self._mean = jnp.asarray(loc)
        self._param_shape = jax.lax.broadcast_shapes(self._mean.shape, self._scale.shape)

    def sample(self, shape: Sequence[int], key: jax.Array) -> jax.Array:
        """`shape + param_shape` draws: `loc + exp(log_scale) * N(0, 1)`."""
        sample_shape = tuple(shape) + self._param_shape
        return jax.random.normal(key, shape=sample_shape) * self._scale + self._mean

    def log_prob(self, x: Any) -> jax.Array:
        """The log density of `x`, summed over the parameter axes (the trailing ones)."""
        log_prob = _normal.logpdf(x, loc=self._mean, scale=self._scale)
        return jnp.sum(log_prob, axis=[-(i + 1) for i in range(len(self._param_shape))])

    @property
    def log_scale(self) -> jax.Array:
        """The log of the standard deviations."""
        return self._log_scale

    @property
    def params(self) -> list[jax.Array]:
        """`[loc, log_scale]`."""
        return [self._mean, self._log_scale]


def multi_normal(loc: Any, log_scale: Any) -> MultiNormalDiagFromLogScale:
    """A diagonal Gaussian with mean `loc` and standard deviations `exp(log_scale)`.

    Args:
      loc: the mean (an array).
      log_scale: the log of the standard deviations (an array broadcasting with `loc`).

    Returns:
      A `MultiNormalDiagFromLogScale` (`sample(shape, key)`, `log_prob(x)`, `params`, `log_scale`).

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> dist = gradtx.numerics.multi_normal(jnp.zeros(2), jnp.zeros(2))
        >>> dist.sample((3,), jax.random.key(0)).shape
        (3, 2)
        >>> dist.log_prob(jnp.zeros(2))  # 2 * log(1 / sqrt(2 pi))
        Array(-1.837877, dtype=float32)

    References:
      optax's `optax.multi_normal`.
    """
    return MultiNormalDiagFromLogScale(loc=loc, log_scale=log_scale)
