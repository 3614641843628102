"""Cosine decays: cosine, with warm restarts, linear cosine and noisy linear cosine."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.schedules._common import PI, Scalar, check_decay, doc, held, number, opaque


@doc
@_factory.api
def cosine_decay(learning_rate: Scalar, decay_steps: Scalar, alpha: Scalar = 0.0) -> _protocol.Schedule:
    r"""Cosine decay from `learning_rate` to `alpha * learning_rate` over `decay_steps` steps.

    .. math:: \eta(c) = \eta_0 \big((1-\alpha)\,\tfrac12 (1 + \cos(\pi c'/d)) + \alpha\big),\ c' = \min(c, d)

    As in TF, `1 - alpha` is computed before the cast to float32 (in float64 for a Python float).

    Args:
      learning_rate: the initial learning rate (>= 0).
      decay_steps: the number of steps to decay over, `d` (> 0).
      alpha: the final rate as a fraction of `learning_rate` (in [0, 1]).

    {RETURNS_RAISES}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.cosine_decay(1.0, 10, alpha=0.1)
        >>> print([round(float(lr(c)), 6) for c in (0, 5, 10, 15)])
        [1.0, 0.55, 0.1, 0.1]

    References:
      Loshchilov & Hutter, SGDR: Stochastic Gradient Descent with Warm Restarts, ICLR 2017.
      TensorFlow, `tf.compat.v1.train.cosine_decay`.
    """
    fn = "cosine_decay"
    check_decay(fn, learning_rate, "decay_steps", decay_steps)
    number(fn, "alpha", alpha)
    _checks.check_in_range(fn, "alpha", alpha, 0.0, 1.0)

    def schedule(count):  # TF CosineDecay.__call__: (1 - self.alpha) * cosine_decayed + self.alpha
        step, lr, steps, a, one_minus_a = opaque(count, learning_rate, decay_steps, alpha, 1.0 - alpha)
        cosine = 0.5 * (1.0 + jnp.cos(PI * (jnp.minimum(step, steps) / steps)))
        return lr * (one_minus_a * cosine + a)

    return schedule


@doc
@_factory.api
def cosine_decay_restarts(
    learning_rate: Scalar,
    first_decay_steps: Scalar,
    t_mul: Scalar = 2.0,
    m_mul: Scalar = 1.0,
    alpha: Scalar = 0.0,
) -> _protocol.Schedule:
    r"""Cosine decay with warm restarts (SGDR): period i lasts `first_decay_steps * t_mul**i` steps.

    With `f = c / d_1`: if `t_mul == 1`, `i = floor(f)`, `f -= i`; else
    `i = floor(log(1 - f (1 - t_mul)) / log(t_mul))`, `f = (f - (1 - t_mul^i)/(1 - t_mul)) / t_mul^i`.

    .. math:: \eta(c) = \eta_0 \big((1-\alpha)\,\tfrac12\, m^{i}\,(1 + \cos(\pi f)) + \alpha\big)

    Args:
      learning_rate: the initial learning rate (>= 0).
      first_decay_steps: the length of the first period, `d_1` (> 0).
      t_mul: how many times longer each period is than the last (> 0).
      m_mul: the factor `m` scaling each restart's peak (>= 0).
      alpha: the final rate as a fraction of `learning_rate` (in [0, 1]).

    {RETURNS_RAISES}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.cosine_decay_restarts(1.0, 10, t_mul=2.0, m_mul=0.5)
        >>> print([round(float(lr(c)), 6) for c in (0, 5, 10, 20, 30)])
        [1.0, 0.5, 0.5, 0.25, 0.25]

    References:
      Loshchilov & Hutter, SGDR: Stochastic Gradient Descent with Warm Restarts, ICLR 2017.
      TensorFlow, `tf.compat.v1.train.cosine_decay_restarts`.
    """
    fn = "cosine_decay_restarts"
    check_decay(fn, learning_rate, "first_decay_steps", first_decay_steps, m_mul=m_mul)
    number(fn, "t_mul", t_mul, _checks.check_positive)
    number(fn, "alpha", alpha)
    _checks.check_in_range(fn, "alpha", alpha, 0.0, 1.0)

    def schedule(count):  # TF CosineDecayRestarts.__call__
        step, lr, steps, t, m, a = opaque(count, learning_rate, first_decay_steps, t_mul, m_mul, alpha)
        f = step / steps
        i_geo = jnp.floor(jnp.log(1.0 - f * (1.0 - t)) / jnp.log(t))
        t_i = held(t**i_geo)
        f_geo = (f - (1.0 - t_i) / (1.0 - t)) / t_i
        flat = t == 1.0  # TF: cond(equal(t_mul, 1.0), ...)
        i = jnp.where(flat, jnp.floor(f), i_geo)
        f = jnp.where(flat, f - i, f_geo)
        return lr * ((1.0 - a) * (0.5 * m**i * (1.0 + jnp.cos(PI * f))) + a)

    return schedule


def _linear_cosine(fn, learning_rate, decay_steps, num_periods, alpha, beta, noise_fn=None, *hyper):
    """TF's (Noisy)LinearCosineDecay; `noise_fn(count, step, *hyper)` is added to the linear part."""
    check_decay(
        fn, learning_rate, "decay_steps", decay_steps, num_periods=num_periods, alpha=alpha, beta=beta
    )

    def schedule(count):
        step, lr, steps, n, a, b, *held = opaque(
            count, learning_rate, decay_steps, num_periods, alpha, beta, *hyper
        )
        step = jnp.minimum(step, steps)
        linear = (steps - step) / steps
        if noise_fn is not None:
            linear = linear + noise_fn(count, step, *held)
        cosine = 0.5 * (1.0 + jnp.cos(PI * (2.0 * n * (step / steps))))
        return lr * ((a + linear) * cosine + b)

    return schedule


@doc
@_factory.api
def linear_cosine_decay(
    learning_rate: Scalar,
    decay_steps: Scalar,
    num_periods: Scalar = 0.5,
    alpha: Scalar = 0.0,
    beta: Scalar = 0.001,
) -> _protocol.Schedule:
    r"""Linear cosine decay: a linear ramp to zero times a cosine with `num_periods` periods.

    .. math:: \eta(c) = \eta_0 \big((\alpha + (d - c')/d)\,\tfrac12 (1 + \cos(2\pi n c'/d)) + \beta\big),
        \quad c' = \min(c, d)

    Args:
      learning_rate: the initial learning rate (>= 0).
      decay_steps: the number of steps to decay over, `d` (> 0).
      num_periods: the number of cosine periods over `decay_steps`, `n` (>= 0).
      alpha: added to the linear part (>= 0).
      beta: added at the end, the floor of the decay (>= 0).

    {RETURNS_RAISES}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.linear_cosine_decay(1.0, 10, beta=0.0)
        >>> print([round(float(lr(c)), 6) for c in (0, 5, 10)])
        [1.0, 0.25, 0.0]

    References:
      Bello et al., Neural Optimizer Search with Reinforcement Learning, ICML 2017.
      TensorFlow, `tf.compat.v1.train.linear_cosine_decay`.
    """
    return _linear_cosine("linear_cosine_decay", learning_rate, decay_steps, num_periods, alpha, beta)


@doc
@_factory.api
def noisy_linear_cosine_decay(
    learning_rate: Scalar,
    decay_steps: Scalar,
    initial_variance: Scalar = 1.0,
    variance_decay: Scalar = 0.55,
    num_periods: Scalar = 0.5,
    alpha: Scalar = 0.0,
    beta: Scalar = 0.001,
    *,
    seed: int = 0,
) -> _protocol.Schedule:
    r"""`linear_cosine_decay` with Gaussian noise of decaying variance added to the linear part.

    .. math:: \eta(c) = \eta_0 \big((\alpha + (d - c')/d + \epsilon_c)\,\tfrac12 (1 + \cos(2\pi n c'/d))
        + \beta\big), \quad \epsilon_c \sim N\big(0, v / (1 + c')^{\gamma}\big), \quad c' = \min(c, d)

    The noise is drawn from `fold_in(key(seed), count)`, a deterministic function of
    `(seed, count)`: the same count always gives the same value (TF's noise is not reproducible).

    Args:
      learning_rate: the initial learning rate (>= 0).
      decay_steps: the number of steps to decay over, `d` (> 0).
      initial_variance: the noise variance at count 0, `v` (>= 0).
      variance_decay: the decay exponent of the variance, `gamma` (>= 0).
      num_periods: the number of cosine periods over `decay_steps`, `n` (>= 0).
      alpha: added to the linear part (>= 0).
      beta: added at the end, the floor of the decay (>= 0).
      seed: the integer seed of the noise.

    {RETURNS_RAISES}

    Example:
        >>> from gradtx import schedules
        >>> lr = schedules.noisy_linear_cosine_decay(1.0, 10, initial_variance=0.01, seed=1)
        >>> bool(lr(3) == lr(3)), bool(lr(3) != schedules.linear_cosine_decay(1.0, 10)(3))
        (True, True)

    References:
      Bello et al., Neural Optimizer Search with Reinforcement Learning, ICML 2017.
      TensorFlow, `tf.compat.v1.train.noisy_linear_cosine_decay`.
    """
    fn = "noisy_linear_cosine_decay"
    number(fn, "initial_variance", initial_variance, _checks.check_nonnegative)
    number(fn, "variance_decay", variance_decay, _checks.check_nonnegative)
    _checks.check_int(fn, "seed", seed)

    def noise(count, step, variance, decay):  # TF: random_normal(stddev=sqrt(v / pow(1 + step, decay)))
        std = jnp.sqrt(variance / held(jnp.power(1.0 + step, decay)))
        key = jax.random.fold_in(jax.random.key(seed), jnp.asarray(count, jnp.int32))
        return jax.random.normal(key, (), jnp.float32) * std

    return _linear_cosine(
        fn, learning_rate, decay_steps, num_periods, alpha, beta, noise, initial_variance, variance_decay
    )
